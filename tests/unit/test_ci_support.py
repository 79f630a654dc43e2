"""The suite's own rule for tests that need root: they skip on a developer's machine that
is not root, and a CI run (CI=true) that is not root stops at once instead of passing
with those tests skipped."""

from __future__ import annotations

import os

import pytest

from tests.support import ci


def test_a_ci_run_that_is_not_root_stops_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.UsageError, match="must run as root"):
        ci.check_ci_user()


@pytest.mark.parametrize(("env", "uid"), [("true", 0), ("", 1000), ("", 0)])
def test_root_in_ci_or_any_user_elsewhere_goes_on(
    monkeypatch: pytest.MonkeyPatch, env: str, uid: int
) -> None:
    monkeypatch.setenv("CI", env)
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    ci.check_ci_user()


@pytest.mark.parametrize(("env", "uid", "skipped"), [("true", 1000, False), ("", 1000, True),
                                                      ("", 0, False)])  # fmt: skip
def test_needs_root_skips_only_outside_ci_and_not_as_root(
    monkeypatch: pytest.MonkeyPatch, env: str, uid: int, skipped: bool
) -> None:
    monkeypatch.setenv("CI", env)
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    mark = ci.needs_root("why").mark
    assert mark.args[0] is skipped and mark.kwargs["reason"] == "why"
