"""The gang's vote on a join attempt: nobody hears the verdict before every rank voted, then
every rank hears every rank's outcome; rounds are independent."""

from __future__ import annotations

from tandem.train._internal.rendezvous import GangRendezvous, RendezvousVote


class Recorder:
    def __init__(self) -> None:
        self.sent: list = []

    def send(self, frame) -> None:
        self.sent.append(frame)


def test_the_verdict_reaches_every_rank_once_all_voted():
    rdzv = GangRendezvous()
    w = [Recorder() for _ in range(3)]
    rdzv.handle("rendezvous_vote", RendezvousVote(0, 2, 3, "ok"), w[2], 11)
    rdzv.handle("rendezvous_vote", RendezvousVote(0, 0, 3, "retry"), w[0], 12)
    assert all(r.sent == [] for r in w)  # rank 1 has not voted yet
    rdzv.handle("rendezvous_vote", RendezvousVote(1, 0, 3, "ok"), w[0], 13)  # another round
    rdzv.handle("rendezvous_vote", RendezvousVote(0, 1, 3, "ok"), w[1], 14)
    verdict = {0: "retry", 1: "ok", 2: "ok"}
    assert w[0].sent == [("reply", 12, True, verdict)]
    assert w[1].sent == [("reply", 14, True, verdict)]
    assert w[2].sent == [("reply", 11, True, verdict)]


def test_a_malformed_vote_is_answered_with_an_error():
    rdzv = GangRendezvous()
    w = Recorder()
    rdzv.handle("rendezvous_vote", RendezvousVote(0, 5, 2, "ok"), w, 1)
    rdzv.handle("rendezvous_vote", ("ok",), w, 2)
    assert [f[:3] for f in w.sent] == [("reply", 1, False), ("reply", 2, False)]
    assert "bad rendezvous vote" in str(w.sent[0][3])
