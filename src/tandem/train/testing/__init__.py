"""Test helpers for ``tandem.train``: real train jobs for the job contract's conformance
suite (``tandem.jobs.testing.service_conformance``)."""

from __future__ import annotations

from tandem.train.testing.conformance import TrainConformanceJobs, conformance_train_fn

__all__ = ["TrainConformanceJobs", "conformance_train_fn"]
