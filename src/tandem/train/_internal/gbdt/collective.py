"""The gang's own all-gather, for what runs before (or beside) a library's collective:
LightGBM's machine list and its per-round metrics, the category columns of its shards, and
TensorFlow's worker addresses.

Why not a library's collective: XGBoost's trainer uses ``xgboost.collective`` (its all-gather
is a broadcast per rank, its barrier an allreduce) and does not use this. LightGBM exposes
no collective to Python at all, and its network needs the machine list before it exists;
TensorFlow's ``TF_CONFIG`` likewise needs every worker's address before TensorFlow starts.
``torch.distributed`` (gloo) would serve, but would make a LightGBM or TensorFlow install
carry torch (gigabytes, and seconds of import in every worker) for a few small JSON values;
``xgboost.collective`` would need xgboost and its tracker in a LightGBM install. So these
use ``GangLink``: rank 0 listens, its address reaches the other ranks through the driver's
rendezvous (``rendezvous_set`` / ``rendezvous_get`` calls), and every rank keeps one
connection to it for the gang's life.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any


def node_ip() -> str:
    return os.environ.get("TANDEM_GBDT_NODE_IP") or "127.0.0.1"


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class GangLink:
    """Rank 0 serves a socket whose address reaches the other ranks through the driver's
    rendezvous; every rank keeps one connection to it for the gang's life. ``allgather``
    gives every rank's JSON value in rank order."""

    def __init__(self, rank: int, world: int, timeout_s: float = 120.0) -> None:
        from tandem.train.session import get_session

        self.rank, self.world = rank, world
        self._conns: list[Any] = []
        if world == 1:
            return
        session = get_session()
        if session is None:
            raise RuntimeError("GangLink runs inside tandem workers only")
        if rank == 0:
            srv = socket.create_server((node_ip(), 0))
            srv.settimeout(timeout_s)
            try:
                session.call("rendezvous_set", [node_ip(), srv.getsockname()[1]])
                by_rank: dict[int, Any] = {}
                for _ in range(world - 1):
                    conn, _ = srv.accept()
                    conn.settimeout(timeout_s)
                    f = conn.makefile("rwb")
                    by_rank[int(json.loads(f.readline()))] = (conn, f)
            finally:
                srv.close()
            self._conns = [by_rank[r] for r in sorted(by_rank)]
        else:
            host, port = session.call("rendezvous_get", None, timeout_s=timeout_s)
            conn = socket.create_connection((host, port), timeout=timeout_s)
            conn.settimeout(None)
            f = conn.makefile("rwb")
            f.write(f"{rank}\n".encode())
            f.flush()
            self._conns = [(conn, f)]

    def allgather(self, value: object) -> list[Any]:
        if self.world == 1:
            return [value]
        if self.rank == 0:
            values = [value]
            for _, f in self._conns:
                line = f.readline()
                if not line:
                    raise ConnectionError("a peer left the gang during an all-gather")
                values.append(json.loads(line))
            out = (json.dumps(values) + "\n").encode()
            for _, f in self._conns:
                f.write(out)
                f.flush()
            return values
        (_, f), = self._conns
        f.write((json.dumps(value) + "\n").encode())
        f.flush()
        line = f.readline()
        if not line:
            raise ConnectionError("rank 0 left the gang during an all-gather")
        return list(json.loads(line))

    def close(self) -> None:
        for conn, f in self._conns:
            for c in (f, conn):
                try:
                    c.close()
                except OSError:
                    pass
        self._conns = []
