"""Driver side of the train cases: build and fit a ``TorchTrainer`` of either system
through its public API (tandem per DESIGN.md, Ray Train V2 per its docs)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def fit_torch_trainer(
    framework: str,
    loop: Callable[[dict[str, Any]], None],
    config: dict[str, Any],
    *,
    workers: int,
    storage_path: str,
    name: str,
    max_failures: int = 0,
) -> tuple[Any, float]:
    """``TorchTrainer(loop, ...).fit()``; returns the Result and the seconds fit() took."""
    if framework == "tandem":
        from tandem.train import FailureConfig, RunConfig, ScalingConfig
        from tandem.train.torch import TorchTrainer
    elif framework == "ray":
        from ray.train import FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchTrainer
    else:
        raise ValueError(f"framework must be 'tandem' or 'ray', got {framework!r}")
    trainer = TorchTrainer(
        loop,
        train_loop_config={**config, "framework": framework},
        scaling_config=ScalingConfig(num_workers=workers),
        run_config=RunConfig(
            name=name,
            storage_path=storage_path,
            failure_config=FailureConfig(max_failures=max_failures),
        ),
    )
    t0 = time.perf_counter()
    result = trainer.fit()
    fit_s = time.perf_counter() - t0
    if getattr(result, "error", None) is not None:
        raise RuntimeError(f"{framework} fit() returned an error: {result.error!r}")
    return result, fit_s
