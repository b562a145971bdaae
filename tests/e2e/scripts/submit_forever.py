"""Submits a job that runs until stopped, and exits (the job keeps running on the server)."""

import time

from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig


def forever(config):
    while True:
        train.report({"alive": 1})
        time.sleep(0.1)


handle = DataParallelTrainer(forever, scaling_config=ScalingConfig(num_workers=1),
                             run_config=RunConfig(name="forever")).fit(block=False)
print("JOB_ID", handle.job_id)
