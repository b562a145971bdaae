"""``ServerContext``: what the parts built on the train server (the dashboard, the model
registry's routes, the users API, the access check) need from it, and nothing more.

``TrainServer`` is one; a test may pass any object with these members. The stores the parts
share are the server's own, opened on first use (``accounts()``, ``models_store()``) and
closed with it, instead of state hung on the server object by whoever came first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tandem.jobs.service import LocalJobService
    from tandem.jobs.store import JobRecord, JobStore
    from tandem.model.registry import ModelStore
    from tandem.server.config import ServerConfig
    from tandem.server.events import EventHub
    from tandem.server.usage import UsageSampler
    from tandem.server.users import AccountStore

__all__ = ["ServerContext"]


class ServerContext(Protocol):
    """The train server as the dashboard, the models API and the users API see it."""

    @property
    def config(self) -> ServerConfig:
        """Its settings (storage folder, database URL, upload limit)."""

    @property
    def store(self) -> JobStore:
        """The job store."""

    @property
    def service(self) -> LocalJobService:
        """The job service that runs the jobs (its scheduler holds the quotas)."""

    @property
    def cluster(self) -> Any:
        """The cluster the jobs run on (``resources()``, ``available()``)."""

    @property
    def hub(self) -> EventHub:
        """Live job events, for followers."""

    @property
    def sampler(self) -> UsageSampler:
        """The workers' latest resource-use samples (``latest``)."""

    @property
    def deposed(self) -> str | None:
        """Why this server writes nothing more (another server took its store), or None."""

    def get(self, job_id: str) -> JobRecord:
        """A job's record (``JobNotFoundError`` when unknown)."""

    def live_state(self, job_id: str) -> str | None:
        """A live job's state as the service sees it now, or None."""

    def accounts(self, admin_token: str | None = None) -> AccountStore:
        """Users, owners, audit log and quotas, on the server's database."""

    def models_store(self) -> ModelStore:
        """The model registry, on the server's database and storage."""
