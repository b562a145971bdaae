"""Echoes workers' output to the driver, each line prefixed with its source.

Workers write stdout/stderr to files in the run folder; one thread tails every active
file and prints new complete lines, so the files are the record and the echo is a view.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TextIO


class _Tail:
    __slots__ = ("partial", "path", "pos", "prefix")

    def __init__(self, path: str, prefix: str) -> None:
        self.path = path
        self.prefix = prefix
        self.pos = os.path.getsize(path) if os.path.exists(path) else 0
        self.partial = b""


class LogEcho:
    def __init__(self, interval_s: float = 0.2, out: TextIO | None = None) -> None:
        self._interval = interval_s
        self._out = out
        self._tails: dict[int, _Tail] = {}
        self._lock = threading.Lock()
        self._ids = 0
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def add(self, path: str, prefix: str) -> int:
        with self._lock:
            self._ids += 1
            self._tails[self._ids] = _Tail(path, prefix)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="tandem-log-echo", daemon=True)
                self._thread.start()
            return self._ids

    def remove(self, key: int, flush: bool = True) -> None:
        with self._lock:
            tail = self._tails.pop(key, None)
            if tail is not None and flush:
                self._read(tail, final=True)

    def _loop(self) -> None:
        while True:
            self._wake.wait(self._interval)
            with self._lock:
                if not self._tails:
                    self._thread = None
                    return
                for tail in list(self._tails.values()):
                    self._read(tail)

    def _read(self, tail: _Tail, final: bool = False) -> None:
        try:
            with open(tail.path, "rb") as f:
                f.seek(tail.pos)
                data = f.read()
        except OSError:
            return
        if not data and not (final and tail.partial):
            return
        tail.pos += len(data)
        data = tail.partial + data
        lines = data.split(b"\n")
        tail.partial = lines.pop()
        if final and tail.partial:
            lines.append(tail.partial)
            tail.partial = b""
        if not lines:
            return
        out = self._out or sys.stdout
        text = "".join(f"{tail.prefix}{line.decode(errors='replace')}\n" for line in lines)
        try:
            out.write(text)
            out.flush()
        except (OSError, ValueError):
            pass


ECHO = LogEcho()
