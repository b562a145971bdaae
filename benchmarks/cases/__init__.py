"""Benchmark cases. Each module exposes ``CASE`` (a :class:`~benchmarks.cases._common.Case`)
with its variants; the order below is the order of a full run."""

from __future__ import annotations

import importlib

from benchmarks.cases._common import Case

CASE_NAMES: tuple[str, ...] = (
    "cold_start",
    "trial_throughput",
    "trial_overhead",
    "result_throughput",
    "fit_startup",
    "ddp_throughput",
    "model_train",
    "failure_recovery",
    "digits_recovery",
    "report_latency",
    "asha",
    "scale",
)


def load_case(name: str) -> Case:
    if name not in CASE_NAMES:
        raise ValueError(f"unknown benchmark case {name!r}; known: {', '.join(CASE_NAMES)}")
    return importlib.import_module(f"benchmarks.cases.{name}").CASE
