"""``TrainContext``: who this worker is, and where its run lives.

Defined here, below ``tandem.train.session`` (which hands it out); ``tandem.train.context``
is its public path (Ray's ``ray.train.context``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from tandem._core.records import record
from tandem._core.results import MISSING, lookup

AWAIT_VERDICT = "__tandem_await_verdict__"
"""Metadata key a tuner sets on a trial's run: rank 0 waits, after each report, for the
tuner's verdict on it (driver call ``tune_verdict``), so a stop, pause or exploit decided at
a result takes effect there. The value is ``True`` (every report waits) or a
:class:`VerdictGate` (only the reports it names wait)."""


HAS_VALIDATION = "__tandem_validation_config__"
"""Metadata key set on a run whose trainer has a ``validation_config``: ``train.report(...,
validation=...)`` is refused without it (Ray's ``has_validation_fn``)."""

TRIAL_RESOURCES = "__tandem_trial_resources__"
"""Metadata key: a tune trial's resources (a ``PlacementGroupFactory`` as data), for
``tune.get_context().get_trial_resources()``."""

@record
class VerdictGate:
    """Which reports of a tuning trial can change its outcome, so that rank 0 waits for the
    tuner's verdict on those only: the tuner builds it from its stopper and scheduler when
    it can tell in advance where they may decide, and every other report goes on at once
    (no round trip to the driver, or across a train server to its client). Conservative: a
    report asks when a key a condition reads is absent or its value does not compare, and
    a report with a truthy ``done`` or ``should_checkpoint`` always asks.

    ``at_least``: ``(key, value)`` pairs; a report asks when ``result[key] >= value``
    (``"a/b"`` reads nested keys, as the stop criteria do).
    ``milestones``: ``(key, values)``; each value asks once, at the first report whose
    ``result[key]`` reached it (one per report: a report that passes two asks, and so does
    the next, as ASHA judges one rung per result). ``milestone_score``: a milestone counts as
    judged only when ``result[milestone_score]`` is not None (ASHA skips a None score).
    ``required``: a report without one of these keys asks.
    ``rows``: the gang's ``rows``-th report and every later one ask.
    ``local``: pickled copies of the tuner's stopper, taken when the trial was launched,
    each ``(trial_id, result) -> bool``; rank 0 calls its copy on every report (so it
    builds the same state from the same results as the tuner's) and a report asks where a
    copy would stop the trial, or raises. Only for stoppers that decide a trial from its
    own results (``Stopper.trial_local``): run next to the job, on a train server too, so
    no other report makes the round trip.
    """

    at_least: tuple[tuple[str, Any], ...] = ()
    milestones: tuple[str, tuple[float, ...]] | None = None
    milestone_score: str | None = None
    required: tuple[str, ...] = ()
    rows: int | None = None
    local: tuple[bytes, ...] = ()

    def load_local(self) -> tuple[Callable[[str, dict[str, object]], bool], ...]:
        """The stopper copies of ``local``, unpickled (once per gang, in rank 0)."""
        import cloudpickle

        return tuple(cloudpickle.loads(b) for b in self.local)

    def asks(self, result: Mapping[str, object], rows: int, judged: set[int],
             local: Sequence[Callable[[dict[str, object]], bool]] = ()) -> bool:
        """Whether the report ``result`` (the ``rows``-th of this gang) must wait for the
        verdict; ``judged`` holds the indices of the milestones already asked at (updated);
        ``local``: the loaded stopper copies, bound to the trial (each sees every report)."""
        fired = False
        for check in local:
            try:
                fired = bool(check(dict(result))) or fired
            except Exception:  # noqa: BLE001 - the tuner's own stopper says what is wrong
                fired = True
        if fired:
            return True
        if result.get("done") or result.get("should_checkpoint"):
            return True
        if self.rows is not None and rows >= self.rows:
            return True
        for key in self.required:
            if lookup(result, key) is MISSING:
                return True
        for key, value in self.at_least:
            got = lookup(result, key)
            if got is MISSING:
                return True
            try:
                if got >= value:
                    return True
            except TypeError:
                return True
        if self.milestones is not None:
            key, values = self.milestones
            got = lookup(result, key)
            if got is MISSING:
                return True
            try:
                passed = [i for i, m in enumerate(values) if i not in judged and got >= m]
            except TypeError:
                return True
            if passed:
                score = self.milestone_score
                if score is None or lookup(result, score) not in (None, MISSING):
                    judged.add(max(passed, key=lambda i: values[i]))  # the highest, as ASHA
                return True
        return False

    def merged(self, other: VerdictGate) -> VerdictGate:
        """A report asks when it would under either gate."""
        if self.milestones is not None and other.milestones is not None:
            raise ValueError("VerdictGate.merged: two gates with milestones")
        rows = [r for r in (self.rows, other.rows) if r is not None]
        return VerdictGate(
            at_least=self.at_least + other.at_least,
            milestones=self.milestones if self.milestones is not None else other.milestones,
            milestone_score=self.milestone_score or other.milestone_score,
            required=tuple(dict.fromkeys(self.required + other.required)),
            rows=min(rows) if rows else None,
            local=self.local + other.local,
        )


@record
class AskSubmitter:
    """A ``call_handlers`` entry: the workers' call is a question for whoever submitted
    the run. It reaches the job listener as ``(kind, tandem.jobs.spec.JobCall)`` whose
    ``reply`` answers the worker, in this process or across a train server's connection;
    a run nobody follows gets ``default``."""

    kind: str
    default: Any = None


@record
class StorageContext:
    """Where a run writes: ``run_path = storage_path/run_name`` (local path or fsspec URL)."""

    storage_path: str
    run_name: str
    experiment_name: str | None = None

    @property
    def run_path(self) -> str:
        return self.storage_path.rstrip("/") + "/" + self.run_name


@record
class TrainContext:
    """Returned by ``train.get_context()`` inside a worker."""

    world_size: int = 1
    world_rank: int = 0
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    storage: StorageContext | None = None
    trial_id: str | None = None
    trial_name: str | None = None
    trial_dir: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def get_world_size(self) -> int:
        return self.world_size

    def get_world_rank(self) -> int:
        return self.world_rank

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_world_size(self) -> int:
        return self.local_world_size

    def get_node_rank(self) -> int:
        return self.node_rank

    def get_trial_id(self) -> str | None:
        return self.trial_id

    def get_trial_name(self) -> str | None:
        return self.trial_name

    def get_trial_dir(self) -> str | None:
        return self.trial_dir

    def get_experiment_name(self) -> str | None:
        if self.storage is None:
            return None
        return self.storage.experiment_name or self.storage.run_name

    def get_storage(self) -> StorageContext | None:
        return self.storage

    def get_run_path(self) -> str | None:
        return self.storage.run_path if self.storage else None

    def get_metadata(self) -> Mapping[str, Any]:
        return {k: v for k, v in self.metadata.items() if k not in (AWAIT_VERDICT, TRIAL_RESOURCES)}

