"""The read-back check refuses a container whose hardening is not in force."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.sandbox import hardening
from cloudrunner.sandbox.container_plan import AGENT_CAPS, ContainerPlan, Mount
from cloudrunner.sandbox.limits import MIB, SandboxLimits

IMAGE = {"Id": "sha256:abc", "Config": {"Env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"]}}


def make_plan(cap_add: tuple[str, ...] = ()) -> ContainerPlan:
    return ContainerPlan(
        image="img:latest",
        runtime="runc",
        user="1000:1000",
        command=["-c", "cat"],
        entrypoint=["/bin/sh"],
        env={"CURSOR_PROJECT_DIR": "/ws"},
        working_dir="/ws",
        mounts=(Mount("/ws", "/ws", False), Mount("/etc/cursor", "/etc/cursor", True)),
        limits=SandboxLimits(memory=256 * MIB, cpus=0.5, pids=64),
        network="none",
        labels={"cloudrunner.worker": "w1"},
        name="cloudrunner-x-1",
        cap_add=cap_add,
    )


def inspected(plan: ContainerPlan) -> dict[str, Any]:
    """What the engine reports for a container created exactly as planned."""
    return {
        "Id": "0123456789abcdef",
        "Image": "sha256:abc",
        "HostConfig": {
            "CapDrop": ["ALL"],
            "CapAdd": list(plan.cap_add) or None,
            "SecurityOpt": ["no-new-privileges"],
            "Privileged": False,
            "ReadonlyRootfs": True,
            "Tmpfs": {"/tmp": hardening.tmpfs_options(plan)},
            "Memory": plan.limits.memory,
            "MemorySwap": plan.limits.memory,
            "CpuPeriod": 100000,
            "CpuQuota": 50000,
            "PidsLimit": 64,
            "Ulimits": [
                {"Name": "nofile", "Soft": plan.limits.nofile, "Hard": plan.limits.nofile},
                {"Name": "fsize", "Soft": plan.limits.fsize, "Hard": plan.limits.fsize},
                {"Name": "core", "Soft": 0, "Hard": 0},
            ],
            "NetworkMode": "none",
            "Runtime": "runc",
            "IpcMode": "private",
            "PidMode": "",
            "CgroupnsMode": "host",
            "Devices": [],
            "LogConfig": {"Type": "none", "Config": {}},
        },
        "Config": {
            "User": "1000:1000",
            "Env": ["CURSOR_PROJECT_DIR=/ws", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
            "Labels": {"cloudrunner.worker": "w1"},
        },
        "Mounts": [
            {"Source": "/ws", "Destination": "/ws", "RW": True},
            {"Source": "/etc/cursor", "Destination": "/etc/cursor", "RW": False},
        ],
    }


def test_a_container_as_planned_is_attested_with_what_was_observed() -> None:
    plan = make_plan()
    attestation = hardening.attest(inspected(plan), IMAGE, plan)
    assert attestation["cap_drop"] == ["ALL"]
    assert attestation["cap_add"] == {}
    assert attestation["read_only_rootfs"] is True
    assert attestation["memory"] == attestation["memory_swap"] == 256 * MIB
    assert attestation["image_id"] == "sha256:abc"
    assert attestation["network"] == "none"
    assert attestation["env_keys"] == ["CURSOR_PROJECT_DIR", "LANG", "PATH"]
    assert {m["target"]: m["mode"] for m in attestation["mounts"]} == {
        "/ws": "rw",
        "/etc/cursor": "ro",
    }


def test_the_agent_capabilities_are_attested_with_their_reasons() -> None:
    plan = make_plan(cap_add=tuple(sorted(AGENT_CAPS)))
    attestation = hardening.attest(inspected(plan), IMAGE, plan)
    assert set(attestation["cap_add"]) == {"KILL", "SETGID", "SETUID"}
    assert all(reason for reason in attestation["cap_add"].values())


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        for key in parents:
            doc = doc[key]
        doc[leaf] = value

    return apply


WEAKENED: dict[str, Callable[[dict[str, Any]], None]] = {
    "caps kept": _set("HostConfig.CapDrop", []),
    "extra cap": _set("HostConfig.CapAdd", ["SYS_ADMIN"]),
    "no nnp": _set("HostConfig.SecurityOpt", []),
    "seccomp off": _set("HostConfig.SecurityOpt", ["no-new-privileges", "seccomp=unconfined"]),
    "privileged": _set("HostConfig.Privileged", True),
    "writable root": _set("HostConfig.ReadonlyRootfs", False),
    "tmpfs unbounded": _set("HostConfig.Tmpfs", {"/tmp": "rw"}),
    "memory": _set("HostConfig.Memory", 0),
    "swap": _set("HostConfig.MemorySwap", -1),
    "cpu": _set("HostConfig.CpuQuota", 0),
    "pids": _set("HostConfig.PidsLimit", None),
    "ulimits": _set("HostConfig.Ulimits", []),
    "network": _set("HostConfig.NetworkMode", "bridge"),
    "runtime": _set("HostConfig.Runtime", "runc-other"),
    "host pid": _set("HostConfig.PidMode", "host"),
    "devices": _set("HostConfig.Devices", [{"PathOnHost": "/dev/kvm"}]),
    "log copy": _set("HostConfig.LogConfig", {"Type": "json-file"}),
    "root user": _set("Config.User", "0:0"),
    "leaked env": _set("Config.Env", ["CURSOR_PROJECT_DIR=/ws", "AWS_SECRET_ACCESS_KEY=x"]),
    "label": _set("Config.Labels", {}),
    "image": _set("Image", "sha256:other"),
    "volume": _set(
        "Mounts",
        [
            {"Source": "/ws", "Destination": "/ws", "RW": True},
            {"Source": "/etc/cursor", "Destination": "/etc/cursor", "RW": False},
            {"Source": "/var/lib/docker/volumes/x", "Destination": "/data", "RW": True},
        ],
    ),
    "string binds": _set("HostConfig.Binds", ["/ws:/ws:rw"]),
    "shared propagation": _set(
        "Mounts",
        [
            {"Source": "/ws", "Destination": "/ws", "RW": True, "Propagation": "rshared"},
            {"Source": "/etc/cursor", "Destination": "/etc/cursor", "RW": False},
        ],
    ),
    "docker socket": _set(
        "Mounts",
        [
            {"Source": "/ws", "Destination": "/ws", "RW": True},
            {"Source": "/etc/cursor", "Destination": "/etc/cursor", "RW": False},
            {"Source": "/run/docker.sock", "Destination": "/var/run/docker.sock", "RW": True},
        ],
    ),
    "config writable": _set(
        "Mounts",
        [
            {"Source": "/ws", "Destination": "/ws", "RW": True},
            {"Source": "/etc/cursor", "Destination": "/etc/cursor", "RW": True},
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(WEAKENED))
def test_any_setting_not_in_force_refuses_the_run(name: str) -> None:
    plan = make_plan()
    doc = copy.deepcopy(inspected(plan))
    WEAKENED[name](doc)
    with pytest.raises(hardening.HardeningNotInForce, match="refusing to run the hook"):
        hardening.attest(doc, IMAGE, plan)


def test_host_config_asks_for_every_setting() -> None:
    plan = make_plan(cap_add=("KILL",))
    kwargs = hardening.host_config_kwargs(plan)
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["cap_add"] == ["KILL"]
    assert kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["read_only"] is True
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 256 * MIB
    assert kwargs["cpu_quota"] == 50000
    assert kwargs["pids_limit"] == 64
    assert kwargs["network_mode"] == "none"
    assert "binds" not in kwargs
    assert kwargs["mounts"] == [
        {
            "Target": "/ws",
            "Source": "/ws",
            "Type": "bind",
            "ReadOnly": False,
            "BindOptions": {"Propagation": "rprivate"},
        },
        {
            "Target": "/etc/cursor",
            "Source": "/etc/cursor",
            "Type": "bind",
            "ReadOnly": True,
            "BindOptions": {"Propagation": "rprivate"},
        },
    ]
    assert {u["Name"] for u in kwargs["ulimits"]} == {"nofile", "fsize", "core"}


def test_the_agent_status_must_show_only_its_capabilities_and_no_new_privs() -> None:
    plan = make_plan(cap_add=tuple(sorted(AGENT_CAPS)))
    good = {"CapBnd": "00000000000000e0", "CapAmb": "0000000000000000", "NoNewPrivs": "1"}
    assert hardening.check_agent_status(good, plan)["agent_cap_bounding"] == "0xe0"
    for bad in (
        {**good, "CapBnd": "000001ffffffffff"},
        {**good, "NoNewPrivs": "0"},
        {**good, "CapAmb": "0000000000000080"},
    ):
        with pytest.raises(hardening.HardeningNotInForce):
            hardening.check_agent_status(bad, plan)


def test_gvisor_without_a_no_new_privs_field_is_recorded_as_not_reported() -> None:
    plan = make_plan(cap_add=tuple(sorted(AGENT_CAPS)))
    result = hardening.check_agent_status({"CapBnd": "00000000000000e0"}, plan)
    assert result["agent_no_new_privs"] == "not reported"


@pytest.mark.parametrize("path", ["/w/a:b", "/w/a,b=c", "/w/with space", "/w/ünï", "/w/a:b:ro"])
def test_paths_reach_the_engine_as_they_are_and_attest_exactly(path: str) -> None:
    """A ':' or ',' in a path is part of the path, not a separator (no "src:dst:mode")."""
    plan = dataclasses.replace(make_plan(), mounts=(Mount(path, path, False),))
    (mount,) = hardening.host_config_kwargs(plan)["mounts"]
    assert (mount["Source"], mount["Target"], mount["ReadOnly"]) == (path, path, False)
    doc = inspected(plan)
    doc["Mounts"] = [{"Type": "bind", "Source": path, "Destination": path, "RW": True}]
    attestation = hardening.attest(doc, IMAGE, plan)
    assert attestation["mounts"] == [{"source": path, "target": path, "mode": "rw"}]
    doc["Mounts"] = [
        {"Type": "bind", "Source": path.split(":")[0], "Destination": path, "RW": True}
    ]
    if ":" in path:
        with pytest.raises(hardening.HardeningNotInForce, match="is not in force"):
            hardening.attest(doc, IMAGE, plan)


@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"),
            min_size=1,
            max_size=12,
        ).filter(lambda part: part not in (".", "..")),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
def test_any_path_is_passed_and_attested_unchanged(parts: list[str], read_only: bool) -> None:
    path = "/" + "/".join(parts)
    plan = dataclasses.replace(make_plan(), mounts=(Mount(path, path, read_only),))
    (mount,) = hardening.host_config_kwargs(plan)["mounts"]
    assert (mount["Source"], mount["Target"], mount["ReadOnly"]) == (path, path, read_only)
    doc = inspected(plan)
    doc["Mounts"] = [{"Type": "bind", "Source": path, "Destination": path, "RW": not read_only}]
    mode = "ro" if read_only else "rw"
    assert hardening.attest(doc, IMAGE, plan)["mounts"] == [
        {"source": path, "target": path, "mode": mode}
    ]
