"""The train controller driven with scripted worker frames (no processes)."""

from __future__ import annotations

from tandem.train._internal.controller import RunSpec, TrainController
from tandem.train._internal.frames import DoneFrame, ProcessExited, StreamEnded
from tandem.train._internal.state import TrainControllerState
from tandem.train.backends.base import Backend
from tandem.train.context import StorageContext


def controller(tmp_path, n: int = 1) -> TrainController:
    c = TrainController(RunSpec(fn_bytes=b"", pass_config=False, config={}, num_workers=n,
                                storage=StorageContext(str(tmp_path), "run"), backend=Backend()))
    c._rank_iter = [0] * n
    return c


def test_exit_notice_overtaking_the_done_frame_is_not_a_failure(tmp_path):
    c = controller(tmp_path)
    # the zygote's exit notice can arrive before the worker's last frames are read
    state = c._handle([(0, 0, ProcessExited(0)), (0, 0, DoneFrame(0, None)),
                       (0, 0, StreamEnded())])
    assert state is TrainControllerState.FINISHED
    assert c._failures == []


def test_stream_end_without_done_is_a_death_named_by_its_exit_code(tmp_path):
    c = controller(tmp_path, n=2)
    state = c._handle([(0, 1, StreamEnded()), (0, 1, ProcessExited(-9))])
    assert state is TrainControllerState.WORKER_FAILED
    assert [f.message for f in c._failures][-1] == "the worker process was killed by SIGKILL"


def test_an_exit_notice_alone_waits_for_the_stream_to_end(tmp_path):
    c = controller(tmp_path)
    assert c._handle([(0, 0, ProcessExited(0))]) is TrainControllerState.RUNNING
