"""Driver side of a gang's rendezvous: rank 0 publishes a value (its process group's store
port), the other ranks wait for it. One per gang start; answered over the workers' channels."""

from __future__ import annotations

from typing import Any

METHODS = ("rendezvous_set", "rendezvous_get", "rendezvous_gather")


class GangRendezvous:
    def __init__(self, num_workers: int = 0) -> None:
        self._value: Any = None
        self._set = False
        self._waiters: list[tuple[Any, int]] = []
        self._n = num_workers
        # rendezvous_gather: key -> {rank: (value, worker, call_id)}; answered once all
        # ranks gave theirs, with the values in rank order (a worker-group ``execute``)
        self._gathers: dict[Any, dict[int, tuple[Any, Any, int]]] = {}

    def handle(self, method: str, payload: Any, worker: Any, call_id: int) -> None:
        if method == "rendezvous_gather":
            key, rank, value = payload
            got = self._gathers.setdefault(key, {})
            got[rank] = (value, worker, call_id)
            if len(got) >= self._n:
                del self._gathers[key]
                values = [got[r][0] for r in sorted(got)]
                for _v, w, cid in got.values():
                    w.send(("reply", cid, True, values))
            return
        if method == "rendezvous_set":
            self._value, self._set = payload, True
            worker.send(("reply", call_id, True, None))
            for w, cid in self._waiters:
                w.send(("reply", cid, True, payload))
            self._waiters = []
        elif self._set:
            worker.send(("reply", call_id, True, self._value))
        else:
            self._waiters.append((worker, call_id))
