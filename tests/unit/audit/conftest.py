"""Shared fixtures of the audit tests."""

from __future__ import annotations

import functools

import pytest

from cloudrunner.audit import verify_log


@pytest.fixture(params=[1, 2], ids=["jobs1", "jobs2"])
def verify_jobs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run the module's tests with `verify_log` analysing files in this process (1) and in
    2 processes (2): the same function, so both must give the same reports."""
    jobs = int(request.param)
    monkeypatch.setattr(request.module, "verify_log", functools.partial(verify_log, jobs=jobs))
    return jobs
