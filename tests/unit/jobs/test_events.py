"""Typed job events: what a listener and a subscriber hear, and the wire form at the edge."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import tandem
from tandem.cluster.local import LocalCluster
from tandem.jobs.events import (
    Asked,
    Checkpointed,
    JobEvent,
    RankReported,
    Reported,
    StatusChanged,
    from_wire,
    to_wire,
)
from tandem.jobs.handle import JobHandle
from tandem.jobs.service import Job, LocalJobService
from tandem.jobs.spec import JobContext, JobOutcome, JobRunner, JobSpec, JobStatus
from tandem.train.api.checkpoint import Checkpoint


class AskingRunner(JobRunner):
    """Reports, commits a checkpoint, asks its submitter a question, returns the answer."""

    def run(self, ctx: JobContext) -> JobOutcome:
        ctx.publish([{"i": 0}, {"i": 1}])
        ctx.emit(Checkpointed(1, Checkpoint("/tmp/ckpt_1"), {"i": 1}))
        ctx.emit(RankReported(1, [(1, 0.5, {"i": 1}, None)]))
        got: list[object] = []
        ctx.ask("verdict", ("t", 1), lambda ok, value: got.append((ok, value)), "continue")
        return JobOutcome(JobStatus.FINISHED, value=got)


def test_listener_and_subscriber_hear_typed_events_in_order():
    heard: list[JobEvent] = []
    seen: list[tuple[str, JobEvent]] = []

    def listener(event: JobEvent) -> None:
        heard.append(event)
        if isinstance(event, Asked):
            event.call.reply(True, f"answer to {event.question}")

    def subscriber(job: Job, event: JobEvent) -> None:
        seen.append((job.name, event))

    svc = LocalJobService(LocalCluster(num_cpus=1))
    svc.subscribe(subscriber)
    try:
        job = svc.submit(JobSpec("typed", ({"CPU": 1},), AskingRunner(), listener=listener))
        assert JobHandle(job).wait(timeout=30) == [(True, "answer to verdict")]
    finally:
        svc.shutdown()

    assert heard[0] == StatusChanged(JobStatus.RUNNING)
    assert heard[1] == Reported([{"i": 0}, {"i": 1}])
    assert isinstance(heard[2], Checkpointed) and heard[2].iteration == 1
    assert heard[2].checkpoint.path == "/tmp/ckpt_1"
    assert heard[3] == RankReported(1, [(1, 0.5, {"i": 1}, None)])
    assert isinstance(heard[4], Asked) and heard[4].call.payload == ("t", 1)
    assert heard[5:] == [StatusChanged(JobStatus.FINISHED)]
    # the subscriber hears every job's events from PENDING on, but not the questions
    assert all(name == "typed" for name, _ in seen)
    assert [e for _, e in seen] == [StatusChanged(JobStatus.PENDING)] + [
        e for e in heard if not isinstance(e, Asked)]
    assert job.last_checkpoint_at is not None  # the service saw the checkpoint


def test_a_question_nobody_follows_gets_its_default():
    svc = LocalJobService(LocalCluster(num_cpus=1))
    try:
        job = svc.submit(JobSpec("alone", ({"CPU": 1},), AskingRunner()))
        assert JobHandle(job).wait(timeout=30) == [(True, "continue")]
    finally:
        svc.shutdown()


def test_wire_form_round_trips_and_names_what_is_wrong():
    events = [StatusChanged(JobStatus.RESTARTING), Reported([{"loss": 0.5}]),
              RankReported(2, [(3, 1.5, {"loss": 0.5}, "/p")]),
              Checkpointed(3, Checkpoint("/c"), {"loss": 0.5})]
    wire = [to_wire(e) for e in events]
    assert [k for k, _ in wire] == ["status", "reports", "rank_reports", "checkpoint"]
    assert wire[3][1][0] == 3 and wire[2][1] == (2, [(3, 1.5, {"loss": 0.5}, "/p")])
    back = [from_wire(k, p) for k, p in wire]
    assert back[:3] == events[:3]
    assert isinstance(back[3], Checkpointed) and back[3].checkpoint.path == "/c"
    assert from_wire("status", "FAILED") == StatusChanged(JobStatus.FAILED)
    with pytest.raises(ValueError, match=r"unknown job event kind 'progress'; the kinds are "
                                         r"'status', 'reports', 'rank_reports', 'checkpoint'"):
        from_wire("progress", 1)
    with pytest.raises(ValueError, match=r"a 'checkpoint' job event with a payload of the "
                                         r"wrong shape \(str\)"):
        from_wire("checkpoint", "x")


def test_mypy_fails_a_consumer_that_forgets_a_kind(tmp_path):
    """The union is closed: a ``match`` that misses a kind does not type-check."""
    src = tmp_path / "consumer.py"
    src.write_text(textwrap.dedent("""
        from typing import assert_never
        from tandem.jobs.events import (
            Asked, Checkpointed, JobEvent, RankReported, Reported, StatusChanged)

        def handle(event: JobEvent) -> str:
            match event:
                case StatusChanged() | Reported() | Checkpointed() | Asked():
                    return event.__class__.__name__
                case _:
                    assert_never(event)
    """))
    # tandem's own source only (MYPYPATH, no site-packages): the union is tandem's; checking
    # every third-party package it reaches took 60-120 s on a loaded 2-core machine
    src_dir = os.path.dirname(os.path.dirname(tandem.__file__))
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports",
                          "silent", "--no-site-packages", "--ignore-missing-imports", str(src)],
                         capture_output=True, text=True, timeout=100,
                         env={**os.environ, "MYPYPATH": src_dir})
    assert out.returncode == 1, out.stdout + out.stderr
    assert 'Argument 1 to "assert_never" has incompatible type "RankReported"' in out.stdout
