"""``ModelResult`` and ``ModelJobHandle``: what ``model.train`` returns (below the registry,
which takes both, and ``_api``, which makes them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.model._model import Model
from tandem.train import Result
from tandem.train.progress import wait_with_progress

if TYPE_CHECKING:
    from tandem.jobs.handle import JobHandle


@dataclass(repr=False)
class ModelResult(Result):
    """A ``Result`` whose ``.model`` is the trained model, built from ``.checkpoint`` (a
    ``Model.save()`` directory) on first use and kept."""

    _model: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_result(cls, result: Result, config: dict[str, object] | None = None) -> ModelResult:
        """The same run as a ``ModelResult`` (e.g. ``tandem.jobs.get(job_id).wait()``'s)."""
        if isinstance(result, ModelResult) and config is None:
            return result
        values = {f.name: getattr(result, f.name) for f in dataclasses.fields(Result)
                  if f.init}
        if config is not None:
            values["config"] = config
        out = cls(**values)
        out._dataframe = result._dataframe  # Ray's Result(metrics_dataframe=...), if given
        return out

    @property
    def model(self) -> Model:
        """The trained model (``Model.from_checkpoint(self.checkpoint)``)."""
        if self._model is None:
            if self.checkpoint is None:
                why = f" It failed: {self.error}" if self.error is not None else ""
                raise ConfigError(
                    f"This run ({self.path}) has no checkpoint, so there is no trained model "
                    f"to load.{why}"
                )
            self._model = Model.from_checkpoint(self.checkpoint)
        return self._model

    def __repr__(self) -> str:
        return "Model" + super().__repr__()


class ModelJobHandle:
    """``model.train(..., block=False)``: a ``JobHandle`` whose ``wait()`` returns a
    ``ModelResult``. Everything else is the job handle's (``job_id``, ``status()``,
    ``results()``, ``stop()``, ``logs()``)."""

    def __init__(self, handle: JobHandle, progress: Any = None) -> None:
        self._handle = handle
        self._progress = progress

    @property
    def job_id(self) -> str:
        return self._handle.job_id

    @property
    def name(self) -> str:
        return self._handle.name

    def status(self) -> str:
        return self._handle.status()

    def done(self) -> bool:
        return self._handle.done()

    def results(self) -> Iterator[dict]:
        return self._handle.results()

    def wait(self, timeout: float | None = None) -> ModelResult:
        """Waits for the run (showing each epoch's report as it arrives, unless
        ``RunConfig(verbose=0)``) and returns its ``ModelResult``."""
        if timeout is None and self._progress is not None:
            progress, self._progress = self._progress, None  # shown once
            return ModelResult.from_result(wait_with_progress(self._handle, progress))
        return ModelResult.from_result(self._handle.wait(timeout=timeout))

    def stop(self) -> None:
        self._handle.stop()

    def logs(self) -> str:
        return self._handle.logs()

    def __repr__(self) -> str:
        return f"Model{self._handle!r}"
