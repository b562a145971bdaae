"""Test helpers for ``tandem.jobs``: conformance suites implementations must pass.

Importing these modules needs pytest.
"""
