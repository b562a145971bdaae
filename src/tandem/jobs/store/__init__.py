"""The job store: jobs, their state transitions, reports and resource use.

``open_store`` picks an implementation::

    open_store()                              # InMemoryJobStore
    open_store("memory")                      # InMemoryJobStore
    open_store("~/.tandem/jobs.db")           # SQLJobStore on that SQLite file
    open_store("sqlite:////abs/path/jobs.db") # the same, as a URL
    open_store("postgresql://user@host/db")   # SQLJobStore on PostgreSQL (psycopg 3)
"""

from __future__ import annotations

import os
from typing import Any

from tandem._core.errors import ConfigError
from tandem.jobs.store.base import (
    JOB_FIELDS,
    TERMINAL_STATES,
    DuplicateJobError,
    DuplicateReportError,
    JobRecord,
    JobStore,
    JobStoreError,
    JobStoreUnavailableError,
    ReportRecord,
    StoreFencedError,
    TransitionRecord,
    UsageSample,
)
from tandem.jobs.store.memory import InMemoryJobStore

__all__ = [
    "JOB_FIELDS",
    "TERMINAL_STATES",
    "DuplicateJobError",
    "DuplicateReportError",
    "InMemoryJobStore",
    "JobRecord",
    "JobStore",
    "JobStoreError",
    "JobStoreUnavailableError",
    "ReportRecord",
    "SQLJobStore",
    "StoreFencedError",
    "TransitionRecord",
    "UsageSample",
    "open_store",
]


def open_store(
    url_or_path: str | os.PathLike[str] | JobStore | None = None, **kwargs: Any
) -> JobStore:
    """Opens the job store named by a URL or a path.

    Args:
        url_or_path: ``None`` or ``"memory"``: a new ``InMemoryJobStore``. A URL with
            ``://`` (``sqlite:///...``, ``postgresql://...``): a ``SQLJobStore`` on it. Any
            other string or path: a SQLite file at that path (``~`` expanded; parent
            folders created). A ``JobStore``: returned as is.
        **kwargs: Passed to ``SQLJobStore`` (``busy_timeout_s``, ``retry_timeout_s``,
            ``engine_kwargs``); refused for the in-memory store.

    Raises:
        ConfigError: an unsupported URL scheme, an empty path, or kwargs for memory.
    """
    if isinstance(url_or_path, JobStore):
        return url_or_path
    if url_or_path is None or url_or_path == "memory":
        if kwargs:
            raise ConfigError(
                f"open_store({url_or_path!r}) makes an InMemoryJobStore, which takes no "
                f"options; got {sorted(kwargs)}. Pass a SQLite path or a database URL to use them."
            )
        return InMemoryJobStore()
    if not isinstance(url_or_path, (str, os.PathLike)):
        raise ConfigError(
            f"open_store() got {type(url_or_path).__name__} {url_or_path!r}; pass None, "
            f"'memory', a file path, or a URL such as 'sqlite:///jobs.db' or 'postgresql://host/db'"
        )
    text = os.fspath(url_or_path)
    if not text.strip():
        raise ConfigError(
            "open_store('') got an empty path; pass None or 'memory' for an in-memory "
            "store, or a file path such as '~/.tandem/jobs.db'"
        )

    from tandem.jobs.store.sql import SQLJobStore

    if "://" in text:
        return SQLJobStore(text, **kwargs)
    path = os.path.abspath(os.path.expanduser(text))
    return SQLJobStore(f"sqlite:///{path}", **kwargs)


def __getattr__(name: str) -> Any:
    # SQLJobStore imports SQLAlchemy; load it only when asked for.
    if name == "SQLJobStore":
        from tandem.jobs.store.sql import SQLJobStore

        return SQLJobStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
