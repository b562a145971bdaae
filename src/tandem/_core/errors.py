"""The exception hierarchy. Every error tandem raises on purpose is a ``TandemError``."""

from __future__ import annotations


class TandemError(Exception):
    """Root of every error tandem raises on purpose."""


class ConfigError(TandemError, ValueError):
    """A user-supplied value is invalid. The message names the value, what is allowed and a fix."""


class ResourcesUnavailableError(TandemError, ValueError):
    """A job asks for more of a resource than the cluster will ever have."""


class JobNotFoundError(TandemError, KeyError):
    """No job with the given id is known to the job service."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain message.
        return str(self.args[0]) if self.args else "job not found"


class JobStoppedError(TandemError, RuntimeError):
    """The job was stopped before it finished."""


class ServiceShutdownError(TandemError, RuntimeError):
    """The job service was shut down while the caller waited on it."""
