"""Driver side of a gang's rendezvous, answered over the workers' channels; one per gang start.

- ``rendezvous_set`` / ``rendezvous_get``: rank 0 publishes a value (its process group's
  store port), the other ranks wait for it.
- ``rendezvous_vote``: every rank says how its attempt to join the collective went
  (a ``RendezvousVote``); once all ``world_size`` ranks of that round voted, each gets every
  rank's outcome, so the gang decides together to go on, retry or give up (a collective
  that formed on some ranks and not on others is torn down and formed again by all).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from tandem._core.records import record
from tandem.train._internal.frames import ReplyFrame, encode

METHODS = ("rendezvous_set", "rendezvous_get", "rendezvous_vote", "rendezvous_gather")

Outcome = Literal["ok", "retry", "fatal"]


@record
class RendezvousVote:
    """One rank's outcome of one attempt (``round``) at joining the gang's collective."""

    round: int
    rank: int
    world_size: int
    outcome: Outcome


class Replier(Protocol):
    """Where a rendezvous answer goes: a driver-side worker handle
    (``tandem.cluster.base.WorkerProcess``)."""

    def send(self, obj: object) -> None: ...


class GangRendezvous:
    def __init__(self, num_workers: int = 0) -> None:
        self._value: Any = None
        self._set = False
        self._waiters: list[tuple[Replier, int]] = []
        self._votes: dict[int, dict[int, Outcome]] = {}
        self._voters: dict[int, list[tuple[Replier, int]]] = {}
        self._n = num_workers
        # rendezvous_gather: key -> {rank: (value, worker, call_id)}; answered once all
        # ranks gave theirs, with the values in rank order (a worker-group ``execute``)
        self._gathers: dict[Any, dict[int, tuple[Any, Replier, int]]] = {}

    def handle(self, method: str, payload: Any, worker: Replier, call_id: int) -> None:
        if method == "rendezvous_vote":
            self._vote(payload, worker, call_id)
            return
        if method == "rendezvous_gather":
            key, rank, value = payload
            got = self._gathers.setdefault(key, {})
            got[rank] = (value, worker, call_id)
            if len(got) >= self._n:
                del self._gathers[key]
                values = [got[r][0] for r in sorted(got)]
                for _v, w, cid in got.values():
                    w.send(encode(ReplyFrame(cid, True, values)))
            return
        if method == "rendezvous_set":
            self._value, self._set = payload, True
            worker.send(encode(ReplyFrame(call_id, True, None)))
            for w, cid in self._waiters:
                w.send(encode(ReplyFrame(cid, True, payload)))
            self._waiters = []
        elif self._set:
            worker.send(encode(ReplyFrame(call_id, True, self._value)))
        else:
            self._waiters.append((worker, call_id))

    def _vote(self, vote: object, worker: Replier, call_id: int) -> None:
        if not isinstance(vote, RendezvousVote) or not 0 <= vote.rank < vote.world_size:
            worker.send(encode(ReplyFrame(call_id, False,
                                          ValueError(f"bad rendezvous vote {vote!r}"))))
            return
        votes = self._votes.setdefault(vote.round, {})
        votes[vote.rank] = vote.outcome
        voters = self._voters.setdefault(vote.round, [])
        voters.append((worker, call_id))
        if len(votes) < vote.world_size:
            return
        outcomes = dict(sorted(votes.items()))
        del self._votes[vote.round], self._voters[vote.round]
        for w, cid in voters:
            w.send(encode(ReplyFrame(cid, True, outcomes)))
