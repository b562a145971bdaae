"""A script pointed at a train server (TANDEM_ADDRESS) submits a job and exits at once."""

import os
import sys
import time

from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig


def loop(config):
    train.report({"step": 0})
    deadline = time.monotonic() + 60  # go on once the follower (another process) saw step 0
    while not os.path.exists(config["flag"]):
        assert time.monotonic() < deadline, "nobody followed the job"
        time.sleep(0.01)
    for step in range(1, 5):
        train.report({"step": step, "loss": 1.0 / step})


handle = DataParallelTrainer(loop, train_loop_config={"flag": sys.argv[1]},
                             scaling_config=ScalingConfig(num_workers=2),
                             run_config=RunConfig(name="followed")).fit(block=False)
print("JOB_ID", handle.job_id)
