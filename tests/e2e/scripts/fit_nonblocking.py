"""fit(block=False): a JobHandle whose results() stream while the job runs; wait(), logs(),
status() and stop()."""

import os
import sys
import time

from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

flag = os.path.join(sys.argv[1], "go")


def loop(config):
    rank = train.get_context().get_world_rank()
    train.report({"step": 0})
    # the next reports wait for the driver to have seen the first one: results() streams
    deadline = time.monotonic() + 60
    while not os.path.exists(config["flag"]):
        assert time.monotonic() < deadline, "the driver never saw the first report"
        time.sleep(0.01)
    for step in range(1, 4):
        train.report({"step": step})
    print(f"hello from rank {rank}", flush=True)


handle = DataParallelTrainer(loop, train_loop_config={"flag": flag},
                             scaling_config=ScalingConfig(num_workers=2),
                             run_config=RunConfig(name="nonblocking")).fit(block=False)
print("JOB", handle.job_id, handle.status())
steps = []
for row in handle.results():
    steps.append(row["step"])
    if row["step"] == 0:
        print("STATUS_WHILE_RUNNING", handle.status())
        open(flag, "w").close()
print("STEPS", steps)
result = handle.wait(timeout=60)
print("FINAL", handle.status(), result.metrics["step"])
logs = handle.logs()
print("LOGS_HAVE_RANK1", "hello from rank 1" in str(logs))


def forever(config):
    while True:
        train.report({"alive": 1})
        time.sleep(0.05)


h2 = DataParallelTrainer(forever, scaling_config=ScalingConfig(num_workers=1),
                         run_config=RunConfig(name="to_stop")).fit(block=False)
next(iter(h2.results()))  # it runs
h2.stop()
deadline = time.monotonic() + 30
while h2.status() != "STOPPED" and time.monotonic() < deadline:
    time.sleep(0.05)
print("STOPPED_STATUS", h2.status())
