"""A service of a compose file under deploy/, run on the test's own engine with the docker
SDK exactly as the file declares it (no compose CLI): variables substituted as compose
does, then image, command, user, environment, mounts (with their propagation), tmpfs and
confinement taken over key by key. A key this reader does not know fails the test, so the
file cannot say more than the test runs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker.types
import yaml

_VARIABLE = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")
#: keys that only compose itself acts on (building, restarting, ordering, stopping)
_COMPOSE_ONLY = {"build", "restart", "depends_on", "stop_grace_period"}


def substitute(value: str, variables: Mapping[str, str]) -> str:
    """`${NAME}`, `${NAME:-default}`, `${NAME:?message}` as compose reads them."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        found = variables.get(name, "")
        if op and op.endswith("?") and not found:
            raise AssertionError(f"compose needs {name}: {arg}")
        if op and op.endswith("-") and not found:
            return arg
        return found

    return _VARIABLE.sub(one, value)


def _resolved(value: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return substitute(value, variables)
    if isinstance(value, list):
        return [_resolved(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: _resolved(v, variables) for k, v in value.items()}
    return value


def service(path: Path, name: str, variables: Mapping[str, str]) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    resolved: dict[str, Any] = _resolved(document["services"][name], variables)
    return resolved


def run_arguments(spec: Mapping[str, Any]) -> dict[str, Any]:
    """`containers.run` keyword arguments for one resolved service."""
    out: dict[str, Any] = {"image": spec["image"], "detach": True}
    mounts: list[docker.types.Mount] = []
    for key, value in spec.items():
        if key in _COMPOSE_ONLY or key == "image":
            continue
        if key == "command":
            out["command"] = list(value)
        elif key in ("user", "working_dir", "hostname", "read_only", "cap_drop", "group_add"):
            out[key] = value
        elif key == "security_opt":
            out["security_opt"] = list(value)
        elif key == "environment":
            out["environment"] = {k: str(v) for k, v in value.items()}
        elif key == "tmpfs":
            out["tmpfs"] = dict(item.split(":", 1) for item in value)
        elif key == "volumes":
            for volume in value:
                assert volume["type"] == "bind", f"only binds are run here: {volume}"
                mounts.append(
                    docker.types.Mount(
                        volume["target"], volume["source"], type="bind",
                        read_only=bool(volume.get("read_only", False)),
                        propagation=volume.get("bind", {}).get("propagation"),
                    )
                )  # fmt: skip
        else:
            raise AssertionError(f"the compose key {key!r} is not run by this test")
    out["mounts"] = mounts
    return out
