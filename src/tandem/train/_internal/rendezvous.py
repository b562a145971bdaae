"""Driver side of a gang's rendezvous: rank 0 publishes a value (its process group's store
port), the other ranks wait for it. One per gang start; answered over the workers' channels."""

from __future__ import annotations

from typing import Any

METHODS = ("rendezvous_set", "rendezvous_get")


class GangRendezvous:
    def __init__(self) -> None:
        self._value: Any = None
        self._set = False
        self._waiters: list[tuple[Any, int]] = []

    def handle(self, method: str, payload: Any, worker: Any, call_id: int) -> None:
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
