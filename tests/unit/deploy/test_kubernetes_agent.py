"""deploy/kubernetes-agent: cloudrunner as a sidecar of a cloud agent's pod, validated
offline as deploy/kubernetes is (the Kubernetes schemas, strictly, and yamllint), and
checked for what the model needs: the agent's workspace and the socket shared at the same
paths, the engine seeing what hook containers mount by path, and an agent hooks file that
routes every cloud event to the sidecar."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from yamllint import linter
from yamllint.config import YamlLintConfig

from cloudrunner.protocol.events import CLOUD_EVENTS
from cloudrunner.settings import Settings, load_settings
from cloudrunner.vm import provisioning as vm_setup
from tests.unit.deploy.manifests import DEPLOY, ROOT, YAMLLINT_CONFIG, documents, env_of, mounts_of

LAYOUT = DEPLOY / "kubernetes-agent"
VERSIONS = ("1.29.0", "1.33.0")
WORKER_UID = 10010


def _files() -> list[Path]:
    return sorted(LAYOUT.glob("*.yaml"))


def _resources() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, d) for p in _files() for d in documents(p) if d.get("kind") != "Kustomization"]


def _resource(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for _, d in _resources() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _pod() -> dict[str, Any]:
    spec: dict[str, Any] = _resource("StatefulSet", "cloud-agent")["spec"]["template"]["spec"]
    return spec


def _container(name: str) -> dict[str, Any]:
    (found,) = [c for c in _pod()["containers"] + _pod()["initContainers"] if c["name"] == name]
    return found


def load_settings_text(text: str, **overrides: Any) -> Settings:
    """The settings a ConfigMap's config.toml makes."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(text)
        return load_settings(config, environ={}, overrides=overrides)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_strictly_against_the_schemas(version: str) -> None:
    kinds = {d["kind"] for _, d in _resources()}
    assert {"Namespace", "ConfigMap", "StatefulSet", "Service"} <= kinds
    for path, doc in _resources():
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{path.relative_to(ROOT)} ({doc['kind']}): {exc}", pytrace=False)
    broken = copy.deepcopy(_resource("StatefulSet", "cloud-agent"))
    broken["spec"]["template"]["spec"]["initContainers"][0]["restartPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)


def test_yamllint_finds_nothing() -> None:
    config = YamlLintConfig(file=str(YAMLLINT_CONFIG))
    problems = [
        f"{path.relative_to(ROOT)}:{p.line}: {p.message}"
        for path in _files()
        for p in linter.run(path.read_text(), config, str(path))
    ]
    assert problems == []


def test_the_kustomization_lists_every_manifest_and_image() -> None:
    (kustomization,) = documents(LAYOUT / "kustomization.yaml")
    assert set(kustomization["resources"]) == {p.name for p in _files()} - {"kustomization.yaml"}
    images = {c["image"].rsplit(":", 1)[0] for c in _pod()["containers"] + _pod()["initContainers"]}
    assert {i["name"] for i in kustomization["images"]} == images - {"docker"}
    for _, doc in _resources():
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "cloud-agents"
    statefulset = _resource("StatefulSet", "cloud-agent")
    service = _resource("Service", "cloud-agent")
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert statefulset["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_cloudrunner_is_a_native_sidecar_up_before_the_agent() -> None:
    init = [c["name"] for c in _pod()["initContainers"]]
    assert init == ["client", "engine", "hook-image", "cloudrunner"]
    sidecar = _container("cloudrunner")
    assert sidecar["restartPolicy"] == "Always" and _container("engine")["restartPolicy"]
    assert sidecar["startupProbe"]["exec"]["command"] == ["cloudrunner", "health"]
    assert [c["name"] for c in _pod()["containers"]] == ["agent"]
    grace = _pod()["terminationGracePeriodSeconds"]
    text = _resource("ConfigMap", "cloudrunner-settings")["data"]["config.toml"]
    assert grace > load_settings_text(text).server.drain_timeout_s


def test_the_agent_and_cloudrunner_share_the_workspace_and_the_socket_at_one_path() -> None:
    sidecar, agent = _container("cloudrunner"), _container("agent")
    args = sidecar["args"]
    workspace = args[args.index("--workspace") + 1]
    socket = args[args.index("--socket") + 1]
    mine, theirs = mounts_of(sidecar), mounts_of(agent)
    assert mine["workspace"]["mountPath"] == theirs["workspace"]["mountPath"] == workspace
    run_dir = socket.rsplit("/", 1)[0]
    assert mine["run"]["mountPath"] == theirs["run"]["mountPath"] == run_dir
    assert env_of(agent)["CLOUDRUNNER_SOCKET"] == env_of(sidecar)["CLOUDRUNNER_SOCKET"] == socket
    assert agent["workingDir"] == workspace
    # the socket is private to the worker's uid: the agent runs as it
    assert agent["securityContext"]["runAsUser"] == WORKER_UID
    assert sidecar["securityContext"]["runAsUser"] == WORKER_UID
    # the agent gets neither the engine, nor cloudrunner's state, nor the fleet's hooks
    assert set(theirs) == {"workspace", "run", "client", "agent-hooks"}
    (workspace_claim,) = [
        t for t in _resource("StatefulSet", "cloud-agent")["spec"]["volumeClaimTemplates"]
        if t["metadata"]["name"] == "workspace"
    ]  # fmt: skip
    assert workspace_claim["spec"]["accessModes"] == ["ReadWriteOnce"]  # one pod


def test_the_engine_sees_what_hook_containers_mount_where_cloudrunner_does() -> None:
    engine, sidecar = mounts_of(_container("engine")), mounts_of(_container("cloudrunner"))
    for shared in ("workspace", "state", "enterprise-hooks", "engine-socket"):
        assert engine[shared]["mountPath"] == sidecar[shared]["mountPath"], shared
    env = env_of(_container("cloudrunner"))
    assert env["DOCKER_HOST"] == f"unix://{sidecar['engine-socket']['mountPath']}/docker.sock"
    assert env["CLOUDRUNNER_STATE_DIR"] == sidecar["state"]["mountPath"]
    assert env["CLOUDRUNNER_ENTERPRISE_HOOKS"].startswith(
        sidecar["enterprise-hooks"]["mountPath"] + "/"
    )
    assert env["CLOUDRUNNER_AUDIT_LOG"].startswith(sidecar["audit"]["mountPath"] + "/")
    privileged = [
        c["name"]
        for c in _pod()["containers"] + _pod()["initContainers"]
        if c.get("securityContext", {}).get("privileged")
    ]
    assert privileged == ["engine"]
    declared = {v["name"] for v in _pod()["volumes"]} | {
        t["metadata"]["name"]
        for t in _resource("StatefulSet", "cloud-agent")["spec"]["volumeClaimTemplates"]
    }
    for c in _pod()["containers"] + _pod()["initContainers"]:
        assert set(mounts_of(c)) <= declared, c["name"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(c["resources"][kind]), (c["name"], kind)


def test_the_settings_and_enterprise_hooks_load_and_pass_validate(tmp_path: Path) -> None:
    env = env_of(_container("cloudrunner"))
    text = _resource("ConfigMap", "cloudrunner-settings")["data"]["config.toml"]
    settings = load_settings_text(text)
    assert str(settings.state_dir) == env["CLOUDRUNNER_STATE_DIR"]
    assert str(settings.sources.enterprise_hooks) == env["CLOUDRUNNER_ENTERPRISE_HOOKS"]
    data = _resource("ConfigMap", "cloudrunner-enterprise-hooks")["data"]
    example = ROOT / "examples" / "enterprise"
    assert json.loads(data["hooks.json"]) == json.loads((example / "hooks.json").read_text())
    assert data["no-secrets.py"] == (example / "hooks" / "no-secrets.py").read_text()
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks.json").write_text(data["hooks.json"])
    (tmp_path / "hooks" / "no-secrets.py").write_text(data["no-secrets.py"])
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "validate", str(tmp_path / "hooks.json")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_agents_hooks_file_routes_every_cloud_event_as_vm_writes_it(tmp_path: Path) -> None:
    """The file `cloudrunner vm` writes for this pod, and `--check` finds nothing it lacks
    (the client exists in the pod, not here)."""
    agent_hooks = json.loads(_resource("ConfigMap", "cloud-agent-hooks")["data"]["hooks.json"])
    sidecar = _container("cloudrunner")
    socket = Path(sidecar["args"][sidecar["args"].index("--socket") + 1])
    client_dir = mounts_of(_container("agent"))["client"]["mountPath"]
    copy_command = _container("client")["command"]
    assert copy_command[-1].rstrip("/") == client_dir
    client = f"{client_dir}/{Path(copy_command[-2]).name}"
    assert Path(client).name == vm_setup.COMPILED_CLIENT
    # the pod's sources, laid out here
    enterprise = tmp_path / "enterprise"
    shutil.copytree(ROOT / "examples" / "enterprise", enterprise)
    text = _resource("ConfigMap", "cloudrunner-settings")["data"]["config.toml"]
    settings = load_settings_text(
        text, **{"sources.enterprise_hooks": str(enterprise / "hooks.json"),
                 "workspace.path": str(tmp_path / "workspace")},
    )  # fmt: skip
    needs = vm_setup.plan(settings).needs
    expected = vm_setup.agent_hooks(needs, vm_setup.Client((client, "hook"), True), socket)
    assert agent_hooks == expected
    assert sorted(agent_hooks["hooks"]) == sorted(CLOUD_EVENTS)
    faults = vm_setup.check(agent_hooks, needs)
    assert faults and all("does not exist or is not executable here" in f for f in faults)
    mount = mounts_of(_container("agent"))["agent-hooks"]
    assert mount["mountPath"] == "/etc/cursor" and mount["readOnly"] is True
