"""GET /api/jobs/{id} shows a state and the transitions that led to it together: the live
state (from the job service) is ahead of the store for a moment after each change."""

from __future__ import annotations

from types import SimpleNamespace

from tandem.server.core import TrainServer


def _server(stored: list[str], live: str | None):
    flushed: list[float] = []

    def get(job_id: str):
        return SimpleNamespace(job_id=job_id, state=stored[min(len(flushed), len(stored) - 1)])

    return SimpleNamespace(get=get, live_state=lambda job_id: live,
                           store=SimpleNamespace(transitions=lambda job_id: []),
                           writer=SimpleNamespace(flush=lambda t: flushed.append(t) or True)
                           ), flushed


def test_a_record_behind_its_live_state_is_stored_before_it_is_shown():
    # resumed after a preemption: live RUNNING, the store still at RESTARTING
    srv, flushed = _server(["RESTARTING", "RUNNING"], "RUNNING")
    rec, _, live = TrainServer.get_settled(srv, "job_1")  # type: ignore[arg-type]
    assert (rec.state, live) == ("RUNNING", "RUNNING") and len(flushed) == 1
    # ended: the same
    srv, flushed = _server(["RUNNING", "FINISHED"], "FINISHED")
    rec, _, live = TrainServer.get_settled(srv, "job_1")  # type: ignore[arg-type]
    assert rec.state == "FINISHED" and len(flushed) == 1
    # in step (the usual case), or no longer in memory: nothing to wait for
    for stored, now in ((["RUNNING"], "RUNNING"), (["FINISHED"], None)):
        srv, flushed = _server(stored, now)
        rec, _, _ = TrainServer.get_settled(srv, "job_1")  # type: ignore[arg-type]
        assert rec.state == stored[0] and not flushed


def _preempted_during_the_reads(lands_after: int) -> SimpleNamespace:
    """A server whose job is preempted (live RESTARTING, its transition stored at once)
    right after its ``lands_after``-th read of record, transitions or live state."""
    reads = 0
    world = {"live": "RUNNING", "transitions": ["PENDING", "RUNNING"]}

    def read(value):
        nonlocal reads
        reads += 1
        if reads == lands_after + 1:
            world["live"] = "RESTARTING"
            world["transitions"] = [*world["transitions"], "RESTARTING"]
        return value

    return SimpleNamespace(
        get=lambda job_id: read(SimpleNamespace(state=world["transitions"][-1])),
        store=SimpleNamespace(transitions=lambda job_id: read(list(world["transitions"]))),
        live_state=lambda job_id: read(world["live"]),
        writer=SimpleNamespace(flush=lambda t: True))


def test_a_change_that_lands_while_the_job_is_read_never_shows_a_state_older_than_its_transitions():
    """A preemption stored at any point during the reads: the state shown is never behind
    the last transition shown (CI once saw RUNNING beside its own RESTARTING transition,
    when the live state was read before the transitions)."""
    for lands_after in range(4):
        srv = _preempted_during_the_reads(lands_after)
        rec, transitions, live = TrainServer.get_settled(srv, "job_1")  # type: ignore[arg-type]
        assert live == transitions[-1], (lands_after, live, transitions)
