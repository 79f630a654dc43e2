"""deploy/kubernetes: validated offline against the Kubernetes schemas, linted, and checked
for what the worker needs of its pod (shared paths, probes, limits, references)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig

from cloudrunner.commands.serve import ServeError, read_token
from cloudrunner.settings import load_settings
from tests.unit.deploy.manifests import (
    DEPLOY,
    KUBERNETES,
    ROOT,
    YAMLLINT_CONFIG,
    container,
    deployment,
    documents,
    env_of,
    kubernetes_files,
    kubernetes_resources,
    mounts_of,
    pod_spec,
    resource,
)

#: the oldest version with native sidecar containers (on by default) and a recent one
VERSIONS = ("1.29.0", "1.33.0")
WORKER_UID = 10010


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_strictly_against_the_schemas(version: str) -> None:
    resources = kubernetes_resources()
    kinds = {doc["kind"] for _, doc in resources}
    assert {
        "Namespace", "ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget",
        "PersistentVolumeClaim", "RuntimeClass",
    } <= kinds  # fmt: skip
    for path, doc in resources:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{path.relative_to(ROOT)} ({doc['kind']}): {exc}", pytrace=False)


def test_the_validator_catches_a_misspelt_field_and_a_wrong_type() -> None:
    misspelt = copy.deepcopy(deployment())
    misspelt["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, VERSIONS[0], strict=True)
    wrong = copy.deepcopy(deployment())
    wrong["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, VERSIONS[0], strict=True)


def test_yamllint_finds_nothing_in_deploy() -> None:
    config = YamlLintConfig(file=str(YAMLLINT_CONFIG))
    files = [*kubernetes_files(), DEPLOY / "compose.yaml", YAMLLINT_CONFIG]
    problems = [
        f"{path.relative_to(ROOT)}:{p.line}: {p.level}: {p.message}"
        for path in files
        for p in linter.run(path.read_text(), config, str(path))
    ]
    assert problems == []
    # and the linter is live: a duplicated key is reported
    assert list(linter.run("---\na: 1\na: 2\n", config))


def test_the_kustomization_lists_every_manifest_but_the_optional_ones() -> None:
    (kustomization,) = documents(KUBERNETES / "kustomization.yaml")
    listed = set(kustomization["resources"])
    present = {
        str(p.relative_to(KUBERNETES))
        for p in kubernetes_files()
        if p.name != "kustomization.yaml" and p.parent.name != "optional"
    }
    assert listed == present
    worker_image = container("worker")["image"].rsplit(":", 1)[0]
    assert [i["name"] for i in kustomization["images"]] == [worker_image]


def test_every_object_is_in_the_namespace_and_selectors_match_the_pods() -> None:
    for path, doc in kubernetes_resources():
        if doc["kind"] not in ("Namespace", "RuntimeClass"):
            assert doc["metadata"]["namespace"] == "cloudrunner", path
    labels = deployment()["spec"]["template"]["metadata"]["labels"]
    selectors = [
        deployment()["spec"]["selector"]["matchLabels"],
        resource("Service", "cloudrunner")["spec"]["selector"],
        resource("PodDisruptionBudget", "cloudrunner-worker")["spec"]["selector"]["matchLabels"],
    ]
    for selector in selectors:
        assert selector.items() <= labels.items()


def test_the_engine_is_a_sidecar_that_sees_the_shared_paths_where_the_worker_does() -> None:
    engine, worker = container("engine"), container("worker")
    assert engine in pod_spec()["initContainers"]
    assert engine["restartPolicy"] == "Always"  # a native sidecar: outlives the worker
    engine_mounts, worker_mounts = mounts_of(engine), mounts_of(worker)
    # hook containers bind-mount these by the worker's path, resolved by the engine
    for shared in ("state", "enterprise-hooks", "engine-socket"):
        assert engine_mounts[shared]["mountPath"] == worker_mounts[shared]["mountPath"], shared
    assert worker_mounts["enterprise-hooks"]["readOnly"] is True
    socket_dir = worker_mounts["engine-socket"]["mountPath"]
    socket = f"unix://{socket_dir}/docker.sock"
    assert env_of(worker)["DOCKER_HOST"] == socket
    assert f"--host={socket}" in engine["args"]
    assert engine["args"][0] == "dockerd"  # so the image adds no TCP listener
    assert not any(a.startswith("--host=tcp") for a in engine["args"])
    assert f"--group={WORKER_UID}" in engine["args"]  # the worker's group may use it
    pull = container("hook-image")
    assert env_of(pull)["DOCKER_HOST"] == socket
    assert "cloudrunner/hook-runtime:latest" in " ".join(pull["command"])


def test_paths_in_the_environment_match_the_mounts_and_the_settings() -> None:
    worker = container("worker")
    env, mounts = env_of(worker), mounts_of(worker)
    state = mounts["state"]["mountPath"]
    assert env["CLOUDRUNNER_STATE_DIR"] == state  # the probes find the socket there
    assert env["CLOUDRUNNER_ENTERPRISE_HOOKS"].startswith(mounts["enterprise-hooks"]["mountPath"])
    assert env["CLOUDRUNNER_AUDIT_LOG"].startswith(mounts["audit"]["mountPath"] + "/")
    assert env["CLOUDRUNNER_CONFIG"].startswith(mounts["settings"]["mountPath"] + "/")
    token_flag = worker["args"][worker["args"].index("--token-file") + 1]
    assert token_flag.startswith(mounts["api-token"]["mountPath"] + "/")
    # the audit log is per pod ($(VAR) is expanded by Kubernetes from an earlier variable)
    names = [e["name"] for e in worker["env"]]
    assert "$(CLOUDRUNNER_WORKER_ID)" in env["CLOUDRUNNER_AUDIT_LOG"]
    assert names.index("CLOUDRUNNER_WORKER_ID") < names.index("CLOUDRUNNER_AUDIT_LOG")


def test_the_settings_configmap_is_valid_worker_settings(tmp_path: Path) -> None:
    text = resource("ConfigMap", "cloudrunner-settings")["data"]["config.toml"]
    config = tmp_path / "config.toml"
    config.write_text(text)
    env = env_of(container("worker"))
    settings = load_settings(config, environ={k: v for k, v in env.items() if "$(" not in v})
    assert str(settings.state_dir) == env["CLOUDRUNNER_STATE_DIR"]
    assert tomllib.loads(text)["state_dir"] == env["CLOUDRUNNER_STATE_DIR"]
    assert settings.sandbox.isolation == "session"
    # SIGTERM drains for drain_timeout_s; the pod is given longer than that
    grace = pod_spec()["terminationGracePeriodSeconds"]
    assert grace > settings.server.drain_timeout_s


def test_the_enterprise_hooks_configmap_is_the_example_and_passes_validate(
    tmp_path: Path,
) -> None:
    data = resource("ConfigMap", "cloudrunner-enterprise-hooks")["data"]
    example = ROOT / "examples" / "enterprise"
    assert json.loads(data["hooks.json"]) == json.loads((example / "hooks.json").read_text())
    assert data["no-secrets.py"] == (example / "hooks" / "no-secrets.py").read_text()
    volume = next(v for v in pod_spec()["volumes"] if v["name"] == "enterprise-hooks")
    items = {i["key"]: i["path"] for i in volume["configMap"]["items"]}
    assert items == {"hooks.json": "hooks.json", "no-secrets.py": "hooks/no-secrets.py"}
    # laid out as the volume lays it out, the file passes `cloudrunner validate`
    (tmp_path / "hooks").mkdir()
    for key, path in items.items():
        (tmp_path / path).write_text(data[key])
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "validate", str(tmp_path / "hooks.json")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_referenced_configmaps_secrets_and_claims_exist() -> None:
    for volume in pod_spec()["volumes"]:
        if "configMap" in volume:
            data = resource("ConfigMap", volume["configMap"]["name"])["data"]
            for item in volume["configMap"].get("items", []):
                assert item["key"] in data
        if "secret" in volume:
            resource("Secret", volume["secret"]["secretName"])
        if "persistentVolumeClaim" in volume:
            resource("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    for entry in container("worker")["env"]:
        ref = entry.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["key"] in resource("Secret", ref["name"])["stringData"]
    declared = {v["name"] for v in pod_spec()["volumes"]}
    for name in ("worker", "engine", "hook-image"):
        assert set(mounts_of(container(name))) <= declared


def test_the_api_token_placeholder_is_refused_so_it_cannot_be_used(tmp_path: Path) -> None:
    placeholder = resource("Secret", "cloudrunner-api-token")["stringData"]["api-token"]
    token_file = tmp_path / "api-token"
    token_file.write_text(placeholder)
    with pytest.raises(ServeError, match="shorter than 16 characters"):
        read_token(token_file)


def test_every_container_has_requests_and_limits() -> None:
    spec = pod_spec()
    for c in spec["containers"] + spec["initContainers"]:
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(c["resources"][kind]), (c["name"], kind)


def test_probes_ask_cloudrunner_health_and_the_metrics_annotations_name_the_api_port() -> None:
    worker = container("worker")
    assert worker["livenessProbe"]["exec"]["command"] == ["cloudrunner", "health"]
    assert worker["startupProbe"]["exec"]["command"] == ["cloudrunner", "health"]
    assert worker["readinessProbe"]["exec"]["command"] == ["cloudrunner", "health", "--ready"]
    (port,) = worker["ports"]
    listen = worker["args"][worker["args"].index("--listen") + 1]
    assert listen == f"0.0.0.0:{port['containerPort']}"
    annotations = deployment()["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port["containerPort"])
    assert annotations["prometheus.io/path"] == "/metrics"
    (service_port,) = resource("Service", "cloudrunner")["spec"]["ports"]
    assert service_port["targetPort"] == port["name"]


def test_only_the_engine_is_privileged_and_the_worker_runs_as_the_images_user() -> None:
    spec = pod_spec()
    privileged = [
        c["name"]
        for c in spec["containers"] + spec["initContainers"]
        if c.get("securityContext", {}).get("privileged")
    ]
    assert privileged == ["engine"]
    context = container("worker")["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == WORKER_UID == context["runAsGroup"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert f"USER {WORKER_UID}:{WORKER_UID}" in (ROOT / "Dockerfile").read_text()
    assert spec["securityContext"]["fsGroup"] == WORKER_UID
    assert spec["automountServiceAccountToken"] is False


def test_the_optional_runtime_class_is_gvisor_and_not_applied_by_default() -> None:
    runtime_class = resource("RuntimeClass", "gvisor")
    assert runtime_class["handler"] == "runsc"
    assert "runtimeClassName" not in pod_spec()
    text = (KUBERNETES / "deployment.yaml").read_text()
    assert "# runtimeClassName: gvisor" in text
    assert (
        yaml.safe_load(text.replace("# runtimeClassName", "runtimeClassName"))["spec"]["template"][
            "spec"
        ]["runtimeClassName"]
        == runtime_class["metadata"]["name"]
    )
