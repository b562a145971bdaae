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
                           writer=SimpleNamespace(flush=lambda t: flushed.append(t) or True)
                           ), flushed


def test_a_record_behind_its_live_state_is_stored_before_it_is_shown():
    # resumed after a preemption: live RUNNING, the store still at RESTARTING
    srv, flushed = _server(["RESTARTING", "RUNNING"], "RUNNING")
    rec, live = TrainServer.get_settled(srv, "job_1")  # type: ignore[arg-type]
    assert (rec.state, live) == ("RUNNING", "RUNNING") and len(flushed) == 1
    # ended: the same
    srv, flushed = _server(["RUNNING", "FINISHED"], "FINISHED")
    rec, live = TrainServer.get_settled(srv, "job_1")  # type: ignore[arg-type]
    assert rec.state == "FINISHED" and len(flushed) == 1
    # in step (the usual case), or no longer in memory: nothing to wait for
    for stored, now in ((["RUNNING"], "RUNNING"), (["FINISHED"], None)):
        srv, flushed = _server(stored, now)
        rec, _ = TrainServer.get_settled(srv, "job_1")  # type: ignore[arg-type]
        assert rec.state == stored[0] and not flushed
