"""The embedded job service with real worker processes: gang scheduling, handles, logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import tandem
from tandem import train
from tandem._core.errors import ResourcesUnavailableError
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig
from tests.processes import no_workers_left, worker_processes

pytestmark = pytest.mark.timeout(120)


def record_interval(config):
    start = time.time()
    time.sleep(config["sleep"])
    rank = train.get_context().get_world_rank()
    with open(os.path.join(config["out"], f"{config['tag']}_{rank}.json"), "w") as f:
        json.dump([start, time.time()], f)
    train.report({"done": 1})


def test_two_gangs_on_two_cpus_never_overlap(storage, tmp_path):
    tandem.init(num_cpus=2)
    handles = []
    for tag in ("a", "b"):
        trainer = DataParallelTrainer(
            record_interval,
            train_loop_config={"out": str(tmp_path), "tag": tag, "sleep": 0.5},
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(storage_path=storage, name=tag),
        )
        handles.append(trainer.fit(block=False))
    assert handles[1].status() == "PENDING"  # the second gang waits for the whole gang to fit
    for h in handles:
        h.wait(timeout=60)
        assert h.status() == "FINISHED"
    a = [json.loads((tmp_path / f"a_{r}.json").read_text()) for r in range(2)]
    b = [json.loads((tmp_path / f"b_{r}.json").read_text()) for r in range(2)]
    assert max(end for _, end in a) <= min(start for start, _ in b)


def test_impossible_job_is_refused_at_once(storage):
    tandem.init(num_cpus=2, resources={"accelerator_x": 1})
    trainer = DataParallelTrainer(lambda: None, scaling_config=ScalingConfig(num_workers=3),
                                  run_config=RunConfig(storage_path=storage))
    t0 = time.monotonic()
    with pytest.raises(ResourcesUnavailableError) as info:
        trainer.fit()
    assert time.monotonic() - t0 < 1.0
    msg = str(info.value)
    assert "CPU=3" in msg and "CPU=2" in msg
    with pytest.raises(ResourcesUnavailableError, match="GPU=1"):
        DataParallelTrainer(lambda: None, scaling_config=ScalingConfig(use_gpu=True)).fit()
    with pytest.raises(ResourcesUnavailableError, match="accelerator_x=2"):
        DataParallelTrainer(lambda: None, scaling_config=ScalingConfig(
            num_workers=2, resources_per_worker={"accelerator_x": 1})).fit()
    assert no_workers_left() == []


def test_custom_resources_gate_concurrency(storage, tmp_path):
    tandem.init(num_cpus=2, resources={"accelerator_x": 1})
    handles = [
        DataParallelTrainer(
            record_interval,
            train_loop_config={"out": str(tmp_path), "tag": tag, "sleep": 0.4},
            scaling_config=ScalingConfig(num_workers=1, resources_per_worker={"CPU": 1, "accelerator_x": 1}),
            run_config=RunConfig(storage_path=storage, name=tag),
        ).fit(block=False)
        for tag in ("a", "b")
    ]
    for h in handles:
        h.wait(timeout=60)
    a = json.loads((tmp_path / "a_0.json").read_text())
    b = json.loads((tmp_path / "b_0.json").read_text())
    assert a[1] <= b[0]  # one accelerator: the CPU was free but the second job waited


def test_async_train_function_with_async_iterator(storage):
    async def batches(n):
        import asyncio

        for i in range(n):
            await asyncio.sleep(0.001)
            yield i

    async def train_fn(config):
        total = 0
        async for b in batches(config["n"]):
            total += b
            train.report({"total": total})

    tandem.init(num_cpus=2)
    result = DataParallelTrainer(train_fn, train_loop_config={"n": 10},
                                 scaling_config=ScalingConfig(num_workers=2),
                                 run_config=RunConfig(storage_path=storage)).fit()
    assert result.metrics == {"total": 45}
    assert len(result.metrics_dataframe) == 10


def test_no_argument_function_and_result_files(storage):
    def f():
        train.report({"a": 1, "ctx": train.get_context().get_world_size()})
        train.report({"a": 2, "ctx": train.get_context().get_world_size()})

    tandem.init(num_cpus=2)
    result = DataParallelTrainer(f, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=RunConfig(storage_path=storage, name="files")).fit()
    run = os.path.join(storage, "files")
    assert result.path == run
    assert json.load(open(os.path.join(run, "params.json"))) == {}
    lines = open(os.path.join(run, "result.json")).read().splitlines()
    assert [json.loads(line)["a"] for line in lines] == [1, 2]
    header = open(os.path.join(run, "progress.csv")).readline().strip().split(",")
    assert header[:2] == ["a", "ctx"] and "training_iteration" in header
    assert result.metrics == {"a": 2, "ctx": 2}


def test_job_handle_streams_results_while_running(storage, tmp_path):
    go = tmp_path / "go"

    def f(config):
        train.report({"phase": 1})
        while not os.path.exists(config["go"]):
            time.sleep(0.01)
        print("second phase now", flush=True)
        train.report({"phase": 2})

    tandem.init(num_cpus=2)
    handle = DataParallelTrainer(f, train_loop_config={"go": str(go)},
                                 scaling_config=ScalingConfig(num_workers=2),
                                 run_config=RunConfig(storage_path=storage)).fit(block=False)
    it = handle.results()
    first = next(it)
    assert first["phase"] == 1
    assert handle.status() == "RUNNING"  # the first report arrived before the job ended
    go.touch()
    assert next(it)["phase"] == 2
    result = handle.wait(timeout=30)
    assert result.metrics == {"phase": 2}
    assert handle.status() == "FINISHED"
    logs = handle.logs()
    assert "(rank=0) second phase now" in logs and "(rank=1) second phase now" in logs
    assert tandem.jobs.get(handle.job_id).status() == "FINISHED"


def test_stop_kills_the_gang(storage):
    def f():
        train.report({"started": 1})
        time.sleep(60)

    tandem.init(num_cpus=2)
    handle = DataParallelTrainer(f, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=RunConfig(storage_path=storage)).fit(block=False)
    next(handle.results())
    assert len(worker_processes()) == 2
    handle.stop()
    result = handle.wait(timeout=10)
    assert handle.status() == "STOPPED"
    assert result.metrics == {"started": 1}
    assert no_workers_left() == []


def test_worker_output_is_echoed_with_rank_prefix_and_kept_in_files(storage, capfd):
    def f():
        print(f"hello from {train.get_context().get_world_rank()}")
        train.report({"x": 1})

    tandem.init(num_cpus=2)
    r = DataParallelTrainer(f, scaling_config=ScalingConfig(num_workers=2),
                            run_config=RunConfig(storage_path=storage, name="echo")).fit()
    out = capfd.readouterr().out
    assert "(rank=0) hello from 0" in out and "(rank=1) hello from 1" in out
    assert open(os.path.join(r.path, "logs", "rank_1.log")).read() == "hello from 1\n"


def test_gpu_visibility_follows_placement(storage):
    """GPUs are logical resources: each worker sees exactly the devices it was given."""

    def f():
        train.report({"visible": os.environ["CUDA_VISIBLE_DEVICES"]})
        rank = train.get_context().get_world_rank()
        with open(os.path.join(train.get_context().get_run_path(), f"gpu_{rank}"), "w") as fh:
            fh.write(os.environ["CUDA_VISIBLE_DEVICES"])

    tandem.init(num_cpus=2, num_gpus=2)
    r = DataParallelTrainer(f, scaling_config=ScalingConfig(num_workers=2, use_gpu=True),
                            run_config=RunConfig(storage_path=storage)).fit()
    seen = sorted(open(os.path.join(r.path, f"gpu_{i}")).read() for i in range(2))
    assert seen == ["0", "1"]
    r = DataParallelTrainer(f, scaling_config=ScalingConfig(
        num_workers=2, resources_per_worker={"CPU": 1, "GPU": 0.5}),
        run_config=RunConfig(storage_path=storage)).fit()
    seen = sorted(open(os.path.join(r.path, f"gpu_{i}")).read() for i in range(2))
    assert seen == ["0", "0"]  # two halves packed onto one GPU
    r = DataParallelTrainer(f, scaling_config=ScalingConfig(num_workers=1),
                            run_config=RunConfig(storage_path=storage)).fit()
    assert r.metrics == {"visible": ""}


def test_dataset_shards_are_disjoint_and_equal(storage):
    import numpy as np
    import pandas as pd

    def f():
        shard = train.get_dataset_shard("arr")
        df = train.get_dataset_shard("df")
        rank = train.get_context().get_world_rank()
        with open(os.path.join(train.get_context().get_run_path(), f"shard_{rank}.json"), "w") as fh:
            json.dump({"arr": shard.tolist(), "df": df["v"].tolist()}, fh)
        train.report({"n": len(shard)})

    tandem.init(num_cpus=2)
    r = DataParallelTrainer(
        f, scaling_config=ScalingConfig(num_workers=2), run_config=RunConfig(storage_path=storage),
        datasets={"arr": np.arange(11), "df": pd.DataFrame({"v": range(10)})},
    ).fit()
    s0 = json.load(open(os.path.join(r.path, "shard_0.json")))
    s1 = json.load(open(os.path.join(r.path, "shard_1.json")))
    assert s0["arr"] == [0, 1, 2, 3, 4] and s1["arr"] == [5, 6, 7, 8, 9]
    assert s0["df"] == [0, 1, 2, 3, 4] and s1["df"] == [5, 6, 7, 8, 9]


def test_fsspec_url_storage(tmp_path):
    """Checkpoints and results through fsspec (the `local://` protocol takes the URL path)."""
    from tandem.train import Checkpoint

    def f():
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "w.txt"), "w").write("weights")
            train.report({"loss": 0.5}, checkpoint=Checkpoint.from_directory(d))

    tandem.init(num_cpus=2)
    url = f"local://{tmp_path}/remote"
    r = DataParallelTrainer(f, run_config=RunConfig(storage_path=url, name="run")).fit()
    assert r.checkpoint.path == f"{url}/run/checkpoint_000001"
    assert (tmp_path / "remote" / "run" / "checkpoint_000001" / "w.txt").read_text() == "weights"
    assert (tmp_path / "remote" / "run" / "result.json").exists()
    with r.checkpoint.as_directory() as d:
        assert open(os.path.join(d, "w.txt")).read() == "weights"
    assert r.metrics_dataframe["loss"].tolist() == [0.5]


CTRL_C_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from tandem import train
    from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

    def f():
        with open(os.path.join(sys.argv[2], f"pid_{train.get_context().get_world_rank()}"), "w") as fh:
            fh.write(str(os.getpid()))
        for i in range(100000):
            train.report({"i": i})
            time.sleep(0.01)

    DataParallelTrainer(f, scaling_config=ScalingConfig(num_workers=2),
                        run_config=RunConfig(storage_path=sys.argv[1], name="interrupted")).fit()
    """
)


@pytest.mark.timeout(330)
def test_ctrl_c_stops_every_worker_and_leaves_a_consistent_run_folder(storage, tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(CTRL_C_SCRIPT)
    # files, not pipes: nothing reads a pipe until the end, and a driver blocked on a full
    # pipe would stop its run (the test then waited for reports that never came)
    out_path, err_path = tmp_path / "driver.out", tmp_path / "driver.err"
    with open(out_path, "wb") as out_f, open(err_path, "wb") as err_f:
        proc = subprocess.Popen([sys.executable, str(script), storage, str(tmp_path)],
                                stdout=out_f, stderr=err_f)
    run = os.path.join(storage, "interrupted")
    deadline = time.monotonic() + 150  # a loaded 2-core machine: the other test process too
    results = os.path.join(run, "result.json")
    while True:
        started = all((tmp_path / f"pid_{r}").exists() for r in range(2))
        if started and os.path.exists(results) and os.path.getsize(results) > 200:
            break
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            proc.wait(timeout=60)
            raise AssertionError(f"the run never got going (exit {proc.returncode}):\n"
                                 f"{err_path.read_text()[-3000:]}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)  # loaded CI: two test processes on 2 cores
    err = err_path.read_bytes()
    assert proc.returncode != 0 and b"KeyboardInterrupt" in err
    pids = [int((tmp_path / f"pid_{r}").read_text()) for r in range(2)]
    import psutil

    time.sleep(0.2)
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    rows = [json.loads(line) for line in open(os.path.join(run, "result.json"))]
    assert rows and [r["i"] for r in rows] == list(range(len(rows)))
