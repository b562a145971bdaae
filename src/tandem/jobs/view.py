"""``JobState``: the state every job view keeps, and ``iter_reports`` over any ``JobView``.

A job's status, its bounded window of reports and its outcome live under one condition
variable. The service's own record (``Job``), a train server's job seen from a client
(``RemoteJob``) and a job seen from inside a worker (``NestedJob``) all subclass it; they
differ only in what feeds the state and in how ``stop`` / ``read_logs`` reach the job.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping

from tandem.jobs.contract import JobView, ReportWindow
from tandem.jobs.events import ReportRow
from tandem.jobs.spec import JobOutcome, JobStatus

#: Reports a job view keeps in memory by default; past it, the oldest half is dropped
#: (every report is in the run folder's ``result.json``).
DEFAULT_REPORT_WINDOW = 200_000


def check_report_window(report_window: int) -> int:
    if isinstance(report_window, bool) or not isinstance(report_window, int) or report_window < 2:
        raise ValueError(
            f"report_window={report_window!r} is invalid: use an integer >= 2 (the number of "
            f"reports a job keeps in memory; default {DEFAULT_REPORT_WINDOW})."
        )
    return report_window


class JobState:
    """Status, report window and outcome of one job, guarded by ``cond``.

    Writers (one per job: the service's job thread, or the thread following a stream) call
    ``_add_reports``, ``_change_status`` and ``_end``; readers use the ``JobView`` methods.
    Subclasses implement ``stop`` and may override ``_ensure_fed`` (called before a read
    that waits: a remote view starts following its event stream there) and ``read_logs``.

    Args:
        report_window: how many reports to keep in memory; when there are more, the oldest
            are dropped down to half of it (``ReportWindow.first`` then skips them).
    """

    def __init__(
        self,
        job_id: str,
        name: str,
        status: JobStatus = JobStatus.PENDING,
        report_window: int = DEFAULT_REPORT_WINDOW,
    ) -> None:
        self.job_id = job_id
        self.name = name
        self.cond = threading.Condition()
        self._status = status
        self._outcome: JobOutcome | None = None
        self._reports: list[dict] = []
        self._dropped = 0  # reports older than the window
        self._window = check_report_window(report_window)
        self.log_paths: dict[int, str] = {}

    # -- JobView ---------------------------------------------------------------------------
    @property
    def status(self) -> JobStatus:
        return self._status

    @property
    def outcome(self) -> JobOutcome | None:
        return self._outcome

    def read_reports(self, start: int, timeout_s: float | None) -> ReportWindow:
        self._ensure_fed()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self.cond:
            while start >= self._dropped + len(self._reports) and self._outcome is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self.cond.wait(left)
            first = max(start, self._dropped)
            rows = self._reports[first - self._dropped:]
            return ReportWindow(first, rows, self._outcome is not None)

    def wait_outcome(self, timeout_s: float | None) -> JobOutcome | None:
        self._ensure_fed()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self.cond:
            while self._outcome is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self.cond.wait(left)
            return self._outcome

    def read_logs(self) -> str:
        return read_rank_logs(self.log_paths)

    def stop(self) -> None:
        raise NotImplementedError

    # -- feeding (one writer) --------------------------------------------------------------
    def _ensure_fed(self) -> None:
        """Called before a read that waits; the state is fed by someone else by default."""

    def _add_reports(self, rows: list[dict]) -> None:
        with self.cond:
            self._reports.extend(rows)
            if len(self._reports) > self._window:
                drop = len(self._reports) - self._window // 2
                del self._reports[:drop]
                self._dropped += drop
            self.cond.notify_all()

    def _change_status(self, status: JobStatus) -> bool:
        """Sets a non-terminal status; False if it is not a change (or the job is over)."""
        with self.cond:
            if self._status.is_terminal or self._status == status or self._outcome is not None:
                return False
            self._status = status
            self.cond.notify_all()
            return True

    def _end(self, outcome: JobOutcome) -> bool:
        """Records the outcome (and its terminal status); False if already over."""
        with self.cond:
            if self._outcome is not None:
                return False
            self._outcome = outcome
            self._status = outcome.status
            self.cond.notify_all()
            return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}(job_id={self.job_id!r}, name={self.name!r})"


def read_rank_logs(log_paths: Mapping[int, str]) -> str:
    """Each rank's log file, every line prefixed with ``(rank=N)``."""
    out: list[str] = []
    for rank, path in sorted(log_paths.items()):
        if not os.path.exists(path):
            continue
        with open(path, errors="replace") as f:
            for line in f:
                out.append(f"(rank={rank}) {line.rstrip()}")
    return "\n".join(out) + ("\n" if out else "")


def iter_reports(job: JobView, poll_s: float = 0.5) -> Iterator[ReportRow]:
    """Yields a job's reports as they arrive, from the first still in its window, until the
    job ends (a very long run keeps only its latest reports in memory; all of them are in
    the run folder's ``result.json``)."""
    i = 0  # number of the next report
    while True:
        window = job.read_reports(i, poll_s)
        i = window.next
        yield from window.rows
        if window.ended:
            return
