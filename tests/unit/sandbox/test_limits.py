from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from cloudrunner.images import DEFAULT_RUNTIME_IMAGE
from cloudrunner.sandbox.limits import (
    MIB,
    SandboxLimits,
    SandboxProfile,
    machine_cores,
    parse_size,
    session_quota,
)


def test_defaults_are_the_documented_ones() -> None:
    profile = SandboxProfile()
    assert profile.image == DEFAULT_RUNTIME_IMAGE
    assert profile.runtime == "runc"
    assert profile.network == "none"
    assert profile.workspace_mode == "rw"
    assert profile.user is None
    assert profile.fallback_to_hook is False
    assert profile.limits.stdout_cap == MIB
    assert profile.limits.stderr_cap == MIB
    assert profile.limits.default_timeout_s == 60


@pytest.mark.parametrize(
    ("text", "value"),
    [("512MiB", 512 * MIB), ("64m", 64 * MIB), ("1g", 1024 * MIB), ("4096", 4096), ("2 KiB", 2048)],
)
def test_sizes_accept_units(text: str, value: int) -> None:
    assert parse_size(text) == value
    assert SandboxLimits(memory=text).memory == value


def test_a_bad_size_names_the_field_and_the_format() -> None:
    with pytest.raises(ValidationError) as info:
        SandboxLimits(memory="lots")
    text = str(info.value)
    assert "memory" in text
    assert "512MiB" in text


@pytest.mark.parametrize("field", ["user", "group"])
def test_uid_and_gid_zero_are_refused(field: str) -> None:
    with pytest.raises(ValidationError, match="never run as uid/gid 0"):
        SandboxProfile(**{field: 0})


@pytest.mark.parametrize("network", ["host", "container:abc"])
def test_networks_sharing_outside_namespaces_are_refused(network: str) -> None:
    with pytest.raises(ValidationError, match="namespace outside the sandbox"):
        SandboxProfile(network=network)


def test_a_named_network_is_accepted() -> None:
    assert SandboxProfile(network="team-net").network == "team-net"


def test_runtime_names_are_checked() -> None:
    assert SandboxProfile(runtime="runsc").runtime == "runsc"
    with pytest.raises(ValidationError):
        SandboxProfile(runtime="bad runtime; rm -rf")


def test_unknown_keys_are_errors() -> None:
    with pytest.raises(ValidationError, match="memroy"):
        SandboxLimits.model_validate({"memroy": "1g"})


def test_limits_have_floors() -> None:
    with pytest.raises(ValidationError):
        SandboxLimits(pids=1)
    with pytest.raises(ValidationError):
        SandboxLimits(cpus=0)


@pytest.mark.parametrize(
    ("per_hook", "parallel", "cores", "fixed", "expected"),
    [
        (1.0, 4, 2, None, 2.0),  # capped at the machine
        (0.5, 4, 8, None, 2.0),  # enough for the parallel hooks
        (1.0, 1, 8, None, 1.0),  # one at a time: one hook's share
        (2.0, 4, 1, None, 2.0),  # never below one hook's share
        (1.0, 4, 8, 1.5, 1.5),  # session_cpus wins
    ],
)
def test_a_session_container_gets_cpu_for_its_parallel_hooks(
    per_hook: float, parallel: int, cores: int, fixed: float | None, expected: float
) -> None:
    assert session_quota(per_hook, parallel, cores, fixed) == expected


def test_the_machine_has_at_least_one_core() -> None:
    assert 1 <= machine_cores() <= (os.cpu_count() or 1)
