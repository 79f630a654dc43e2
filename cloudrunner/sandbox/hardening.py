"""The hardening every sandbox container gets, and the read-back that proves it.

`create_kwargs` turns a `ContainerPlan` into docker SDK arguments; `attest` reads the
created container back from the engine and refuses (HardeningNotInForce) when any setting
is not what was asked, so a hook never runs in a container that is weaker than planned
(an engine that ignores an option, an image that declares a VOLUME, ...). The settings it
observed are returned for the audit log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import docker
import docker.types

from cloudrunner.errors import CloudrunnerError
from cloudrunner.sandbox.container_plan import AGENT_CAPS, ContainerPlan

CPU_PERIOD_US = 100_000
NO_NEW_PRIVILEGES = "no-new-privileges"
#: security options that would switch off a default confinement
_WEAKENING = ("seccomp=unconfined", "seccomp:unconfined", "apparmor=unconfined", "label=disable")
_CAP_BITS = {"KILL": 5, "SETGID": 6, "SETUID": 7}


class HardeningNotInForce(CloudrunnerError):
    """The engine created a container without every hardening setting in force."""


def tmpfs_options(plan: ContainerPlan) -> str:
    return f"rw,nosuid,nodev,size={plan.limits.tmpfs_size},mode=1777"


def cpu_quota(plan: ContainerPlan) -> int:
    return max(1000, int(plan.limits.cpus * CPU_PERIOD_US))


def host_config_kwargs(plan: ContainerPlan) -> dict[str, Any]:
    """Arguments for `APIClient.create_host_config`."""
    limits = plan.limits
    return {
        "cap_drop": ["ALL"],
        "cap_add": list(plan.cap_add) or None,
        "security_opt": [NO_NEW_PRIVILEGES],
        "privileged": False,
        "read_only": True,
        "tmpfs": {"/tmp": tmpfs_options(plan)},
        "mem_limit": limits.memory,
        "memswap_limit": limits.memory,
        "cpu_period": CPU_PERIOD_US,
        "cpu_quota": cpu_quota(plan),
        "pids_limit": limits.pids,
        "ulimits": [
            docker.types.Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile),
            docker.types.Ulimit(name="fsize", soft=limits.fsize, hard=limits.fsize),
            docker.types.Ulimit(name="core", soft=0, hard=0),
        ],
        "network_mode": plan.network,
        "runtime": plan.runtime,
        "ipc_mode": "private",
        # Structured mounts, never "src:dst:mode" strings: a path may hold ':' or ','.
        "mounts": engine_mounts(plan),
        # Output is read from the attach stream with caps; a log driver would keep a copy.
        "log_config": docker.types.LogConfig(type="none"),
    }


def engine_mounts(plan: ContainerPlan) -> list[docker.types.Mount]:
    """The plan's mounts as the API's `Mounts` entries: private bind mounts, each path
    passed as it is (no parsing by the engine, no directory invented for a missing source)."""
    return [
        docker.types.Mount(
            target=m.target,
            source=m.source,
            type="bind",
            read_only=m.read_only,
            propagation="rprivate",
        )
        for m in plan.mounts
    ]


def create_kwargs(plan: ContainerPlan, host_config: dict[str, Any]) -> dict[str, Any]:
    """Arguments for `APIClient.create_container`."""
    return {
        "image": plan.image,
        "command": plan.command,
        "entrypoint": plan.entrypoint,
        "user": plan.user,
        "environment": dict(plan.env),
        "working_dir": plan.working_dir,
        "labels": dict(plan.labels),
        "name": plan.name,
        "stdin_open": plan.stdin_open,
        "network_disabled": plan.network == "none",
        "host_config": host_config,
    }


def _caps(values: list[str] | None) -> set[str]:
    return {v.upper().removeprefix("CAP_") for v in (values or [])}


def _env_keys(entries: list[str] | None) -> set[str]:
    return {e.partition("=")[0] for e in (entries or [])}


def attest(container: dict[str, Any], image: dict[str, Any], plan: ContainerPlan) -> dict[str, Any]:
    """Check the inspected container against the plan; the observed settings, or raise."""
    host = container.get("HostConfig") or {}
    config = container.get("Config") or {}
    problems: list[str] = []

    def expect(name: str, observed: Any, wanted: Any) -> None:
        if observed != wanted:
            problems.append(f"{name} is {observed!r}, not {wanted!r}")

    expect("CapDrop", _caps(host.get("CapDrop")), {"ALL"})
    expect("CapAdd", _caps(host.get("CapAdd")), set(plan.cap_add))
    security_opt = list(host.get("SecurityOpt") or [])
    if not any(o.split(":")[0].split("=")[0] == NO_NEW_PRIVILEGES for o in security_opt):
        problems.append(f"SecurityOpt {security_opt!r} lacks {NO_NEW_PRIVILEGES}")
    for opt in security_opt:
        if opt.replace(" ", "") in _WEAKENING:
            problems.append(f"SecurityOpt has {opt!r}")
    expect("Privileged", host.get("Privileged"), False)
    expect("ReadonlyRootfs", host.get("ReadonlyRootfs"), True)
    expect("Tmpfs", host.get("Tmpfs"), {"/tmp": tmpfs_options(plan)})
    expect("Memory", host.get("Memory"), plan.limits.memory)
    expect("MemorySwap", host.get("MemorySwap"), plan.limits.memory)
    expect("CpuPeriod", host.get("CpuPeriod"), CPU_PERIOD_US)
    expect("CpuQuota", host.get("CpuQuota"), cpu_quota(plan))
    expect("PidsLimit", host.get("PidsLimit"), plan.limits.pids)
    ulimits = {u.get("Name"): (u.get("Soft"), u.get("Hard")) for u in host.get("Ulimits") or []}
    expect("Ulimits[nofile]", ulimits.get("nofile"), (plan.limits.nofile, plan.limits.nofile))
    expect("Ulimits[fsize]", ulimits.get("fsize"), (plan.limits.fsize, plan.limits.fsize))
    expect("NetworkMode", host.get("NetworkMode"), plan.network)
    expect("Runtime", host.get("Runtime"), plan.runtime)
    # CgroupnsMode is "host" by default on cgroup v1 (where Docker mounts the container's
    # own cgroup subtree instead), so it is recorded, not required.
    for key in ("PidMode", "UTSMode", "UsernsMode"):
        if str(host.get(key) or "") == "host":
            problems.append(f"{key} is 'host'")
    expect("IpcMode", host.get("IpcMode"), "private")
    expect("Devices", host.get("Devices") or [], [])
    expect("LogConfig.Type", (host.get("LogConfig") or {}).get("Type"), "none")
    expect("User", config.get("User"), plan.user)

    wanted_mounts = {(m.source, m.target, not m.read_only) for m in plan.mounts}
    observed_mounts = {
        (str(m.get("Source")), str(m.get("Destination")), bool(m.get("RW")))
        for m in container.get("Mounts") or []
    }
    expect("Binds", host.get("Binds") or [], [])
    for mount in container.get("Mounts") or []:
        kind, propagation = mount.get("Type", "bind"), mount.get("Propagation") or "rprivate"
        if (kind, propagation) != ("bind", "rprivate"):
            problems.append(
                f"mount {mount.get('Destination')} is a {kind} mount with {propagation} "
                "propagation, not a private bind mount"
            )
    for extra in sorted(observed_mounts - wanted_mounts):
        problems.append(
            f"unexpected mount {extra[1]} (from {extra[0]}, {'rw' if extra[2] else 'ro'}); "
            "an image VOLUME or an engine default would make it writable outside the workspace"
        )
    for missing in sorted(wanted_mounts - observed_mounts):
        problems.append(f"mount {missing[1]} ({'rw' if missing[2] else 'ro'}) is not in force")
    for source, target, _ in observed_mounts:
        if source.endswith("docker.sock") or target.endswith("docker.sock"):
            problems.append(f"the Docker socket is mounted at {target}")

    # Only the caller's environment and the image's own ENV: nothing from the worker.
    allowed_env = _env_keys(image.get("Config", {}).get("Env")) | set(plan.env)
    env_keys = _env_keys(config.get("Env"))
    for key in sorted(env_keys - allowed_env):
        problems.append(f"environment variable {key} was set by neither the caller nor the image")

    labels = config.get("Labels") or {}
    for key, value in plan.labels.items():
        expect(f"label {key}", labels.get(key), value)
    image_id = str(image.get("Id", ""))
    expect("Image", container.get("Image"), image_id)

    if problems:
        raise HardeningNotInForce(
            f"refusing to run the hook: container {str(container.get('Id', ''))[:12]} does not "
            "have its hardening in force: " + "; ".join(problems)
        )
    return {
        "container_id": str(container.get("Id", ""))[:12],
        "image": plan.image,
        "image_id": image_id,
        "image_digests": list(image.get("RepoDigests") or []),
        "runtime": host.get("Runtime"),
        "user": config.get("User"),
        "hook_user": plan.hook_user or config.get("User"),
        "cap_drop": sorted(_caps(host.get("CapDrop"))),
        "cap_add": {cap: AGENT_CAPS.get(cap, "") for cap in sorted(_caps(host.get("CapAdd")))},
        "security_opt": security_opt,
        "privileged": host.get("Privileged"),
        "read_only_rootfs": host.get("ReadonlyRootfs"),
        "tmpfs": host.get("Tmpfs"),
        "memory": host.get("Memory"),
        "memory_swap": host.get("MemorySwap"),
        "cpu_period": host.get("CpuPeriod"),
        "cpu_quota": host.get("CpuQuota"),
        "pids_limit": host.get("PidsLimit"),
        "ulimits": {name: list(v) for name, v in sorted(ulimits.items())},
        "network": host.get("NetworkMode"),
        "ipc_mode": host.get("IpcMode"),
        "cgroupns_mode": host.get("CgroupnsMode"),
        "mounts": [
            {"source": s, "target": t, "mode": "rw" if rw else "ro"}
            for s, t, rw in sorted(observed_mounts, key=lambda m: m[1])
        ],
        "env_keys": sorted(env_keys),
        "log_driver": (host.get("LogConfig") or {}).get("Type"),
    }


def capability_mask(caps: tuple[str, ...]) -> int:
    mask = 0
    for cap in caps:
        mask |= 1 << _CAP_BITS[cap]
    return mask


def check_agent_status(status: dict[str, str], plan: ContainerPlan) -> dict[str, Any]:
    """Check what the kernel reports for the agent process itself (its /proc status)."""
    problems: list[str] = []
    try:
        bounding = int(status.get("CapBnd", ""), 16)
    except ValueError:
        bounding = -1
    wanted = capability_mask(plan.cap_add)
    if bounding != wanted:
        problems.append(f"its capability bounding set is {bounding:#x}, not {wanted:#x}")
    try:
        ambient = int(status.get("CapAmb", "0"), 16)
    except ValueError:
        ambient = -1
    if ambient != 0:
        problems.append(f"it has ambient capabilities {ambient:#x}")
    # runc reports NoNewPrivs; gVisor's /proc does not have the field.
    no_new_privs = status.get("NoNewPrivs")
    if no_new_privs is not None and no_new_privs != "1":
        problems.append(f"no_new_privs is {no_new_privs}")
    if problems:
        raise HardeningNotInForce(
            "refusing to run hooks: the session agent reports " + "; ".join(problems)
        )
    return {
        "agent_cap_bounding": f"{bounding:#x}",
        "agent_no_new_privs": no_new_privs if no_new_privs is not None else "not reported",
        "agent_seccomp": status.get("Seccomp", "not reported"),
    }


def create_attached(
    client: docker.DockerClient, plan: ContainerPlan, on_created: Callable[[str], None]
) -> tuple[str, dict[str, Any], Any]:
    """Create the container `plan` describes, read it back, attest it, and attach to its
    stdin/stdout/stderr (before it starts, so no output is missed).

    `on_created(cid)` runs right after creation, so the caller can remove the container on
    any later failure (a `HardeningNotInForce` from the read-back included). Returns the
    container id, the attestation and the attached socket.
    """
    host_config = client.api.create_host_config(**host_config_kwargs(plan))
    cid = str(client.api.create_container(**create_kwargs(plan, host_config))["Id"])
    on_created(cid)
    attestation = attest(
        client.api.inspect_container(cid),
        client.api.inspect_image(plan.image),  # type: ignore[no-untyped-call]
        plan,
    )
    sock = client.api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
    return cid, attestation, sock
