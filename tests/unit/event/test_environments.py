"""The environment stage without an engine: the image comes from a fake builder and the
install runs in a sandbox the fake SandboxProvider opens (the provider that opens the
hooks' sandboxes), so what is recorded, remembered and refused is seen in unit tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cloudrunner import workspace
from cloudrunner.audit import AuditWriter, verify_log
from cloudrunner.event.environments import EnvironmentImages
from cloudrunner.event.sandbox_profiles import SandboxProfiles
from cloudrunner.images import project_image as project_environment
from cloudrunner.images.project_image import EnvironmentBuildError, EnvironmentFileError
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sandbox.base import SandboxConfigError
from cloudrunner.settings import Settings, load_settings
from cloudrunner.worker import Worker, open_audit
from tests.support.cloud_payloads import shell_payload
from tests.support.git_repos import committed_repo, git, write_hooks
from tests.unit.event.fakes import Answers, FakeSandboxes

INSTALL = "make deps"
KEY = "0123456789abcdef" * 4


class FakeBuilder:
    """An ImageBuilder with no engine: every environment gets the same image."""

    def __init__(self) -> None:
        self.built: list[project_environment.ProjectEnvironment] = []

    def build_image(
        self, env: project_environment.ProjectEnvironment
    ) -> project_environment.EnvironmentImage:
        self.built.append(env)
        return project_environment.EnvironmentImage(
            project_environment.image_tag(KEY), "sha256:" + "ab" * 32, KEY, built=True
        )


def _environment_repo(
    root: Path, environment: dict[str, Any] | str | None, hooks: dict[str, Any]
) -> Path:
    cursor = write_hooks(root, hooks) / ".cursor"
    (cursor / "Dockerfile").write_text("FROM cloudrunner/hook-runtime:latest\n")
    if environment is not None:
        text = environment if isinstance(environment, str) else json.dumps(environment)
        (cursor / "environment.json").write_text(text)
    committed_repo(root, "environment")
    return root


def _environment(install: str | None = INSTALL) -> dict[str, Any]:
    found: dict[str, Any] = {"build": {"dockerfile": "Dockerfile", "context": "."}}
    if install is not None:
        found["install"] = install
    return found


def _settings(tmp_path: Path, *, use: bool = True, **more: Any) -> Settings:
    overrides: dict[str, Any] = {
        "state_dir": str(tmp_path / "state"),
        "worker_id": "unit-environments",
        "workspace.use_environment_json": use,
        "home.enabled": False,
        "sources.enterprise_hooks": str(tmp_path / "no-enterprise.json"),
        **more,
    }
    return load_settings(environ={}, overrides=overrides)


class Stage:
    """An environment stage over fakes, and what it wrote."""

    def __init__(
        self, settings: Settings, sandboxes: FakeSandboxes, builder: FakeBuilder | None = None
    ) -> None:
        self.settings = settings
        self.sandboxes = sandboxes
        self.builder = builder or FakeBuilder()
        self.audit: AuditWriter = open_audit(settings)
        self.images = EnvironmentImages(
            settings, SandboxProfiles(settings), self.builder, sandboxes, self.audit
        )

    def records(self) -> list[dict[str, Any]]:
        lines = self.settings.audit_path.read_text().splitlines()
        return [json.loads(line) for line in lines]

    def markers(self) -> list[Path]:
        found = self.settings.state_dir / "environments"
        return sorted(found.glob("*.installed")) if found.exists() else []


@pytest.fixture
def repo(tmp_path: Path) -> workspace.Workspace:
    return workspace.adopt(_environment_repo(tmp_path / "ws", _environment(), {}))


def test_an_install_that_succeeds_is_recorded_and_remembered(
    tmp_path: Path, repo: workspace.Workspace
) -> None:
    sandboxes = FakeSandboxes({INSTALL: (0, "deps ready", "")})
    stage = Stage(_settings(tmp_path), sandboxes)
    image = stage.images.image_for(repo, "c1")
    assert image == project_environment.image_tag(KEY)
    assert sandboxes.ran == [INSTALL]
    assert sandboxes.requests == []  # the install's sandbox is a spec's, never a hook's
    (spec,) = sandboxes.specs
    assert spec.profile.image == image and spec.profile.isolation == "hook"
    assert spec.workspace == repo.root
    assert (spec.labels.worker, spec.labels.session, spec.labels.source) == (
        "unit-environments", "c1", "install",
    )  # fmt: skip
    assert all(opened.closed for opened in sandboxes.opened)
    (record,) = stage.records()
    assert record["kind"] == "environment" and record["outcome"] == "ok"
    assert (record["image"], record["install"], record["commit"]) == (image, INSTALL, repo.commit)
    assert record["exit_code"] == 0 and record["sandbox_id"] == "fake-1"
    (marker,) = stage.markers()
    assert repo.commit is not None and repo.commit in marker.read_text()
    stage.audit.close()
    assert verify_log(stage.settings.audit_path).ok


def test_the_same_image_and_commit_do_not_install_again(
    tmp_path: Path, repo: workspace.Workspace
) -> None:
    sandboxes = FakeSandboxes()
    settings = _settings(tmp_path)
    first = Stage(settings, sandboxes)
    image = first.images.image_for(repo, "c1")
    # the same worker remembers the image: nothing is built or run again
    assert first.images.image_for(repo, "c2") == image
    assert len(first.builder.built) == 1 and sandboxes.ran == [INSTALL]
    first.audit.close()
    # another worker over the same state directory asks the engine for the image, and the
    # marker says the install already ran for it at this commit
    second = Stage(settings, sandboxes)
    assert second.images.image_for(repo, "c3") == image
    assert len(second.builder.built) == 1 and sandboxes.ran == [INSTALL]
    assert [r["kind"] for r in second.records()] == ["environment"]
    second.audit.close()


def test_a_new_commit_installs_again(tmp_path: Path, repo: workspace.Workspace) -> None:
    sandboxes = FakeSandboxes()
    stage = Stage(_settings(tmp_path), sandboxes)
    stage.images.image_for(repo, "c1")
    (repo.root / "README").write_text("more\n")
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-q", "-m", "more")
    moved = workspace.adopt(repo.root)
    assert moved.commit != repo.commit
    stage.images.image_for(moved, "c1")
    assert sandboxes.ran == [INSTALL, INSTALL]
    assert [r["commit"] for r in stage.records()] == [repo.commit, moved.commit]
    assert len(stage.markers()) == 2
    stage.audit.close()


def test_a_failed_install_is_one_line_recorded_and_not_remembered(
    tmp_path: Path, repo: workspace.Workspace
) -> None:
    # the repository chooses the install's stderr: line breaks and terminal escapes
    stderr = "npm ERR! missing\n\x1b[31mbroken\x1b[0m\r\n" + "x" * 2000 + "\nlast words\n"
    sandboxes = FakeSandboxes({INSTALL: (3, "", stderr)})
    stage = Stage(_settings(tmp_path), sandboxes)
    with pytest.raises(EnvironmentBuildError) as caught:
        stage.images.image_for(repo, "c1")
    message = caught.value.message
    assert "\n" not in message and "\r" not in message and "\x1b" not in message
    assert message.isprintable() and len(message) < 600
    assert "install command" in message and "exit 3" in message
    assert str(repo.environment_file) in message and "last words" in message
    (record,) = stage.records()
    assert record["kind"] == "environment"
    assert (record["outcome"], record["exit_code"]) == ("error", 3)
    assert stage.markers() == []
    # not remembered: the next project hook tries again (and records again)
    with pytest.raises(EnvironmentBuildError):
        stage.images.image_for(repo, "c1")
    assert sandboxes.ran == [INSTALL, INSTALL]
    assert len(stage.records()) == 2
    stage.audit.close()
    assert verify_log(stage.settings.audit_path).ok


def test_an_install_sandbox_that_cannot_open_fails_without_a_marker(
    tmp_path: Path, repo: workspace.Workspace
) -> None:
    sandboxes = FakeSandboxes(specs_broken=True)
    stage = Stage(_settings(tmp_path), sandboxes)
    with pytest.raises(SandboxConfigError, match="no sandbox for image"):
        stage.images.image_for(repo, "c1")
    assert sandboxes.ran == [] and stage.markers() == []
    stage.audit.close()


def test_no_install_runs_without_an_install_command(tmp_path: Path) -> None:
    ws = workspace.adopt(_environment_repo(tmp_path / "ws", _environment(install="   "), {}))
    sandboxes = FakeSandboxes()
    stage = Stage(_settings(tmp_path), sandboxes)
    assert stage.images.image_for(ws, "c1") == project_environment.image_tag(KEY)
    assert sandboxes.specs == [] and not stage.settings.audit_path.exists()
    stage.audit.close()


@pytest.mark.parametrize(
    ("use", "environment"),
    [
        (False, _environment()),  # the operator did not turn it on
        (True, None),  # no environment.json
        (True, {"install": INSTALL}),  # nothing to build: the configured image
    ],
)
def test_the_configured_image_is_kept_without_an_environment_to_build(
    tmp_path: Path, use: bool, environment: dict[str, Any] | None
) -> None:
    ws = workspace.adopt(_environment_repo(tmp_path / "ws", environment, {}))
    sandboxes = FakeSandboxes()
    stage = Stage(_settings(tmp_path, use=use), sandboxes)
    assert stage.images.image_for(ws, "c1") is None
    assert stage.builder.built == [] and sandboxes.specs == []
    stage.audit.close()


def test_a_malformed_environment_file_is_refused_before_anything_runs(tmp_path: Path) -> None:
    ws = workspace.adopt(_environment_repo(tmp_path / "ws", '{"build": [1, 2', {}))
    sandboxes = FakeSandboxes()
    stage = Stage(_settings(tmp_path), sandboxes)
    with pytest.raises(EnvironmentFileError):
        stage.images.image_for(ws, "c1")
    assert stage.builder.built == [] and sandboxes.specs == []
    stage.audit.close()


# ---------------------------------------------------------------- through the pipeline


def _worker(tmp_path: Path, install: str, answers: Answers) -> tuple[Worker, FakeSandboxes]:
    hooks = {"beforeShellExecution": [{"command": "guard", "failClosed": True}]}
    ws = _environment_repo(tmp_path / "ws", _environment(install), hooks)
    sandboxes = FakeSandboxes(answers)
    settings = _settings(tmp_path, **{"workspace.path": str(ws)})
    worker = Worker(settings, reap=False, sandboxes=sandboxes)
    worker.pipeline.environments.images = FakeBuilder()
    return worker, sandboxes


def _kinds(worker: Worker) -> list[str]:
    lines = worker.settings.audit_path.read_text().splitlines()
    # (a `skipped` record may say why another source did not load)
    return [kind for line in lines if (kind := json.loads(line)["kind"]) != "skipped"]


def test_project_hooks_open_in_the_environment_image_after_its_install(tmp_path: Path) -> None:
    allow = (0, '{"permission": "allow"}', "")
    worker, sandboxes = _worker(tmp_path, INSTALL, {"guard": allow})
    assert worker.handle(shell_payload()).answer["permission"] == "allow"
    assert worker.handle(shell_payload()).answer["permission"] == "allow"
    assert sandboxes.ran == [INSTALL, "guard", "guard"]
    assert [r.kind for r in sandboxes.requests] == [SourceKind.PROJECT, SourceKind.PROJECT]
    assert {r.image for r in sandboxes.requests} == {project_environment.image_tag(KEY)}
    assert _kinds(worker) == [
        "received", "environment", "hook", "decision", "received", "hook", "decision",
    ]  # fmt: skip
    worker.close()


def test_a_failed_install_fails_a_fail_closed_project_hook(tmp_path: Path) -> None:
    worker, sandboxes = _worker(tmp_path, "exit 3", {"exit 3": (3, "", "broken\n")})
    reply = worker.handle(shell_payload())
    assert reply.answer["permission"] == "deny"
    assert "install command" in reply.answer["agent_message"]
    assert sandboxes.ran == ["exit 3"] and sandboxes.requests == []
    lines = worker.settings.audit_path.read_text().splitlines()
    (hook,) = (r for r in map(json.loads, lines) if r["kind"] == "hook")
    assert hook["outcome"] == "sandbox_error" and "exit 3" in hook["reason"]
    assert "\n" not in hook["reason"]
    worker.close()
