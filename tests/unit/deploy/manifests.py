"""Reading the deployment files of deploy/ for the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
YAMLLINT_CONFIG = ROOT / ".yamllint.yaml"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def kubernetes_files() -> list[Path]:
    return sorted(KUBERNETES.rglob("*.yaml"))


def kubernetes_resources() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object in deploy/kubernetes (the kustomization is no object)."""
    return [
        (path, doc)
        for path in kubernetes_files()
        for doc in documents(path)
        if doc.get("kind") != "Kustomization"
    ]


def resource(kind: str, name: str) -> dict[str, Any]:
    found = [
        d for _, d in kubernetes_resources() if d["kind"] == kind and d["metadata"]["name"] == name
    ]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def deployment() -> dict[str, Any]:
    return resource("Deployment", "cloudrunner-worker")


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = deployment()["spec"]["template"]["spec"]
    return spec


def container(name: str) -> dict[str, Any]:
    spec = pod_spec()
    found = [c for c in spec["containers"] + spec.get("initContainers", []) if c["name"] == name]
    assert len(found) == 1, f"no single container {name}"
    return found[0]


def env_of(container_spec: dict[str, Any]) -> dict[str, str]:
    """The literal environment values of a container (valueFrom entries are left out)."""
    return {e["name"]: e["value"] for e in container_spec.get("env", []) if "value" in e}


def mounts_of(container_spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in container_spec.get("volumeMounts", [])}
