"""A job that prints nothing and only reports (`tandem jobs logs -f` follows it)."""

import time

from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig


def loop(config):
    for step in range(3):
        time.sleep(0.3)
        train.report({"step": step, "loss": 1 / (step + 1)})


handle = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=1),
                             run_config=RunConfig(name="report_only")).fit(block=False)
print("JOB_ID", handle.job_id, flush=True)
