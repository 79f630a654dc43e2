"""`python -m bench.parity.claude {obtain,record,run} CACHE_DIR`: the Claude Code parity set.

`claude_set.json` (beside this file) names public repositories whose `.claude/settings.json`
hooks are commands, each at one commit, and events written for them twice: as Claude Code
gives them to its hooks (`claude`) and as a cloud agent sends the same action to cloudrunner
(`cursor`). The repositories are third-party code: `obtain` puts each one, at its commit,
under CACHE_DIR/claude/repos (outside the project) and nothing of theirs is kept here.

- `record` runs every event bare, the way Claude Code runs hooks (each matching command hook
  of `.claude/settings.json`, in file order, by `bash -c` in the repository root, the Claude
  payload on stdin, `CLAUDE_PROJECT_DIR` set, a fresh layout and an empty HOME), twice, and
  writes what the hooks answered and what that means by Claude Code's rules (`effect`) into
  `claude_set.json`.
- `run` sends each `cursor` event through `cloudrunner serve` (with `sources.claude_code` on)
  and `cloudrunner hook`, reads the answer as the same kind of effect, and prints one row per
  event: the bare effect, the daemon's, whether they agree, and why not.

The reading of Claude answers here is written from Anthropic's documentation on its own (it
does not use cloudrunner's translation), so the comparison checks that translation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.parity.cases import Repository, fill
from bench.parity.layout import host_env, run_shell
from bench.parity.obtain import inside, obtain, tree_of

SET = Path(__file__).with_name("claude_set.json")
PROJECT = Path(__file__).resolve().parents[2]
#: the most a hook may run here, whatever its own timeout says
MAX_TIMEOUT_S = 60.0
_EXACT = re.compile(r"[A-Za-z0-9_|]+")
_RANK = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class ClaudeRepo:
    name: str
    repo: str
    commit: str
    events: list[dict[str, Any]]

    def repository(self) -> Repository:
        return Repository(self.name, self.repo, self.commit, "", "as committed", (), ())


def load_set(path: Path = SET) -> tuple[dict[str, Any], list[ClaudeRepo]]:
    document = json.loads(path.read_text(encoding="utf-8"))
    repos = [
        ClaudeRepo(r["name"], r["repo"], r["commit"], list(r["events"])) for r in document["repos"]
    ]
    return document, repos


def cache_of(cache: Path) -> Path:
    return cache / "claude"


def lay_out(tree: Path, root: Path, home: Path) -> None:
    """A fresh copy of the cached tree at `root`, committed on branch main."""
    shutil.copytree(tree, root, symlinks=True)
    root.chmod(0o755)
    home.mkdir(parents=True, exist_ok=True)
    run_shell(
        "git init -q -b main && git add -A -f && "
        "git -c user.name=parity -c user.email=parity@example.invalid commit -qm snapshot",
        root,
        home,
    )


# ------------------------------------------------------------- Claude Code's rules, bare


def matches(matcher: Any, name: str | None) -> bool:
    """Claude Code's matcher: none, empty or `*` match all; names and `|` are exact; else a
    regular expression searched in the name."""
    if matcher in (None, "", "*"):
        return True
    if not isinstance(matcher, str) or name is None:
        return False
    if _EXACT.fullmatch(matcher):
        return name in matcher.split("|")
    try:
        return re.search(matcher, name) is not None
    except re.error:
        return False


def _subject(payload: dict[str, Any]) -> str | None:
    event = payload["hook_event_name"]
    if event in ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"):
        return str(payload.get("tool_name"))
    return None  # UserPromptSubmit, Stop: Claude Code ignores the matcher


def run_bare(root: Path, home: Path, claude: dict[str, Any]) -> list[dict[str, Any]]:
    """Every matching command hook of `.claude/settings.json`, in file order."""
    payload = {"session_id": "parity", "transcript_path": None, "cwd": str(root), **claude}
    payload = fill(payload, str(root))
    settings = json.loads((root / ".claude" / "settings.json").read_text(encoding="utf-8"))
    groups = (settings.get("hooks") or {}).get(payload["hook_event_name"]) or []
    subject = _subject(payload)
    runs = []
    for group in groups:
        if subject is not None and not matches(group.get("matcher"), subject):
            continue
        for hook in group.get("hooks") or []:
            if hook.get("type") != "command":
                continue
            timeout = min(float(hook.get("timeout") or MAX_TIMEOUT_S), MAX_TIMEOUT_S)
            try:
                proc = subprocess.run(
                    ["bash", "-c", hook["command"]], cwd=root, env=host_env(home, root),
                    input=json.dumps(payload).encode(), capture_output=True, timeout=timeout,
                    check=False,
                )  # fmt: skip
                code: int | None = proc.returncode
                out, err = proc.stdout, proc.stderr
            except subprocess.TimeoutExpired:
                code, out, err = None, b"", b"timeout"
            runs.append(
                {
                    "command": hook["command"],
                    "exit_code": code,
                    "stdout": out.decode(errors="replace"),
                    "stderr": err.decode(errors="replace")[:2000],
                }
            )
    return runs


def kept(run: dict[str, Any]) -> dict[str, Any]:
    """A hook run as the set keeps it: a JSON answer as given, other stdout only as its
    sha256 and length (it can be the repository's own text), stderr cut to 500 characters."""
    stdout = run["stdout"]
    out = {**run, "stderr": run["stderr"][:500]}
    if not _json(stdout):
        data = stdout.encode()
        out["stdout"] = ""
        out["stdout_plain"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    return out


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _plain(run: dict[str, Any]) -> bool:
    """Whether a run wrote non-JSON text on stdout."""
    plain = run.get("stdout_plain")
    if isinstance(plain, dict):
        return bool(plain.get("bytes"))
    return bool(run["stdout"].strip()) and not _json(run["stdout"])


def effect(event: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the hooks' answers make Claude Code do, by its documented rules."""
    decision, message, context = "allow", "", []
    #: what Claude Code would do that no Cursor answer of the event can carry
    lost: list[str] = []
    blocked = False
    for run in runs:
        code, answer = run["exit_code"], _json(run["stdout"]) if run["exit_code"] == 0 else {}
        specific = answer.get("hookSpecificOutput") or {}
        if not isinstance(specific, dict):
            specific = {}
        said: tuple[str, str] | None = None
        if code == 2:
            said = ("deny", run["stderr"].strip())
        elif answer.get("continue") is False:
            said = ("deny", str(answer.get("stopReason") or ""))
        elif specific.get("permissionDecision") in _RANK and event == "PreToolUse":
            said = (
                specific["permissionDecision"],
                str(specific.get("permissionDecisionReason") or ""),
            )
        elif answer.get("decision") == "block":
            said = ("deny", str(answer.get("reason") or ""))
        if said is not None and event in ("PreToolUse", "UserPromptSubmit"):
            # the most restrictive wins; an allow's or ask's reason is shown to the user too
            if _RANK[said[0]] > _RANK[decision] or (said[0] == decision and not message):
                decision, message = said
        elif said is not None and said[0] == "deny" and event in ("Stop", "SubagentStop"):
            if not blocked:
                blocked, message = True, said[1]
        elif said is not None and event == "PostToolUse" and said[1]:
            context.append(said[1])
        if event == "PostToolUse" and isinstance(specific.get("additionalContext"), str):
            context.append(specific["additionalContext"])
        elif code == 0 and event == "UserPromptSubmit" and (answer or _plain(run)):
            # Claude Code adds a prompt hook's stdout (or additionalContext) to the context
            extra = specific.get("additionalContext") if answer else _plain(run)
            if extra:
                lost.append("context added to the prompt")
        elif code == 0 and isinstance(specific.get("additionalContext"), str):
            lost.append(f"additionalContext on {event}")
    out: dict[str, Any]
    if event in ("Stop", "SubagentStop"):
        out = {"decision": "continue" if blocked else "stop", "message": message}
    elif event == "PostToolUse":
        out = {"decision": "none", "message": "\n\n".join(context)}
    elif event == "UserPromptSubmit":
        out = {"decision": "block" if decision == "deny" else "allow", "message": message}
    else:
        out = {"decision": decision, "message": message}
    if lost:
        out["not_carried"] = sorted(set(lost))
    return out


def cursor_effect(event: str, answer: dict[str, Any] | None) -> dict[str, Any]:
    """The daemon's Cursor answer read as the same kind of effect."""
    answer = answer or {}
    if event == "stop":
        follow = answer.get("followup_message")
        return {"decision": "continue" if follow else "stop", "message": follow or ""}
    if event == "postToolUse":
        return {"decision": "none", "message": answer.get("additional_context") or ""}
    if event == "beforeSubmitPrompt":
        blocked = answer.get("continue") is False
        return {"decision": "block" if blocked else "allow",
                "message": answer.get("user_message") or ""}  # fmt: skip
    message = answer.get("agent_message") or answer.get("user_message") or ""
    return {"decision": answer.get("permission", "allow"), "message": message}


def agree(bare: dict[str, Any], daemon: dict[str, Any]) -> tuple[bool, str]:
    """Whether the daemon did what the hooks meant; the difference when not."""
    if bare["decision"] != daemon["decision"]:
        return False, f"decision {bare['decision']} bare, {daemon['decision']} through cloudrunner"
    if bare["message"].strip() != daemon["message"].strip():
        return False, "same decision, different message"
    return True, ""


def by_path_gaps(document: dict[str, Any]) -> list[str]:
    """What the set lacks to catch a sandbox where hooks cannot open their payload by path
    (`/dev/stdin`, issue 34): at least two repositories marked `payload_by_path`, each
    naming its licence, its bare answers stable, and both a refusal and an allow among
    them (such a guard that cannot read its payload lets everything through, so only a
    refusal shows the difference, and an allow shows it is not refusing everything)."""
    repos = [r for r in document.get("repos") or [] if r.get("payload_by_path")]
    gaps = [] if len(repos) >= 2 else [f"{len(repos)} repositories read the payload by path"]
    for repo in repos:
        name = repo.get("name", "?")
        if not repo.get("licence"):
            gaps.append(f"{name}: no licence named")
        events = repo.get("events") or []
        recorded = [e.get("expect_bare") for e in events]
        if not events or not all(r and r.get("stable") and r.get("hooks") for r in recorded):
            gaps.append(f"{name}: bare answers missing or unstable; run record")
            continue
        decisions = {r["effect"]["decision"] for r in recorded if r}
        for wanted in ("deny", "allow"):
            if wanted not in decisions:
                gaps.append(f"{name}: no event the hooks answer {wanted} bare")
    return gaps


# ------------------------------------------------------------- commands


def _cache_or_fail(cache: Path) -> Path | None:
    if inside(cache, PROJECT):
        print(f"parity: {cache} is inside the project; give a cache outside it", file=sys.stderr)
        return None
    return cache_of(cache)


def cmd_obtain(cache: Path, template: str, only: Sequence[str]) -> int:
    root = _cache_or_fail(cache)
    if root is None:
        return 2
    _, repos = load_set()
    failed = 0
    for repo in repos:
        if only and repo.name not in only:
            continue
        try:
            obtain(repo.repository(), root, template)
            print(f"obtained {repo.name} at {repo.commit[:12]}")
        except Exception as exc:  # one repository that cannot be had does not stop the rest
            failed += 1
            print(f"parity: {repo.name}: {exc}", file=sys.stderr)
    return 1 if failed else 0


def _bare_twice(tree: Path, event: dict[str, Any]) -> tuple[list[dict[str, Any]], bool, str]:
    results = []
    with tempfile.TemporaryDirectory(prefix="claude-parity-") as scratch:
        for attempt in range(2):
            root, home = Path(scratch) / f"repo{attempt}", Path(scratch) / f"home{attempt}"
            lay_out(tree, root, home)
            runs = run_bare(root, home, event["claude"])
            results.append([kept(r) for r in fill_back(runs, str(root), str(home))])
    return results[0], results[0] == results[1], scratch


def fill_back(value: Any, root: str, home: str) -> Any:
    """`{ROOT}` and `{HOME}` back in place of this run's paths."""
    if isinstance(value, str):
        return value.replace(root, "{ROOT}").replace(home, "{HOME}")
    if isinstance(value, list):
        return [fill_back(v, root, home) for v in value]
    if isinstance(value, dict):
        return {k: fill_back(v, root, home) for k, v in value.items()}
    return value


def cmd_record(cache: Path, only: Sequence[str]) -> int:
    root = _cache_or_fail(cache)
    if root is None:
        return 2
    document, repos = load_set()
    for raw, repo in zip(document["repos"], repos, strict=True):
        if only and repo.name not in only:
            continue
        tree = tree_of(root, repo.name)
        for event in raw["events"]:
            runs, stable, _ = _bare_twice(tree, event)
            event["expect_bare"] = {
                "hooks": runs,
                "stable": stable,
                "effect": effect(event["claude"]["hook_event_name"], runs),
            }
            print(f"{event['id']}: {event['expect_bare']['effect']} (stable: {stable})")
    SET.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


def _cursor_payload(repo: ClaudeRepo, event: dict[str, Any], root: Path) -> dict[str, Any]:
    name = event["cursor"]["event"]
    return {
        "conversation_id": f"conv-{repo.name}",
        "generation_id": f"gen-{event['id']}",
        "model": "parity",
        "hook_event_name": name,
        "cursor_version": "1.7.52",
        "workspace_roots": [str(root)],
        "user_email": "parity@example.invalid",
        "transcript_path": None,
        **fill(event["cursor"]["fields"], str(root)),
    }


def cmd_run(cache: Path, only: Sequence[str], out: Path, runtime: str) -> int:
    from bench.parity.through import Daemon

    class ClaudeDaemon(Daemon):
        def settings(self) -> dict[str, Any]:
            base = super().settings()
            base["sources"]["claude_code"] = True
            return base

    root = _cache_or_fail(cache)
    if root is None:
        return 2
    _, repos = load_set()
    rows = []
    for repo in repos:
        if only and repo.name not in only:
            continue
        tree = tree_of(root, repo.name)
        if not tree.is_dir():
            print(f"{repo.name}: not in the cache; run obtain first", file=sys.stderr)
            continue
        for event in repo.events:
            recorded = event.get("expect_bare")
            # read again from the recorded hook answers (the reading may have been refined)
            expected = (
                effect(event["claude"]["hook_event_name"], recorded["hooks"]) if recorded else None
            )
            with tempfile.TemporaryDirectory(prefix="claude-parity-") as scratch:
                base = Path(scratch)
                base.chmod(0o755)
                ws, home = base / "repo", base / "home"
                lay_out(tree, ws, home)
                payload = _cursor_payload(repo, event, ws)
                expected = fill(expected, str(ws)) if expected else None
                worker = os.environ.get("CLOUDRUNNER_WORKER_ID") or (
                    f"parity-claude-{uuid.uuid4().hex[:8]}"
                )
                with ClaudeDaemon(base / "daemon", worker, runtime) as daemon:
                    call = daemon.send(payload["hook_event_name"], json.dumps(payload).encode())
                    records = daemon.records(payload["generation_id"])
            got = cursor_effect(payload["hook_event_name"], call.answer)
            same, why = agree(expected, got) if expected else (False, "no recorded bare answer")
            hooks = [r for r in records if r.get("kind") == "hook"]
            rows.append(
                {
                    "id": event["id"], "repo": repo.repo, "commit": repo.commit,
                    "bare": expected, "daemon": got, "answer": call.answer, "same": same,
                    "difference": why,
                    "hooks": [{"command": h.get("command"), "exit_code": h.get("exit_code"),
                               "outcome": h.get("outcome"), "reason": h.get("reason")}
                              for h in hooks],
                }
            )  # fmt: skip
            shown = "same" if same else f"DIFFERS: {why}"
            if same and expected and expected.get("not_carried"):
                shown += f" (Cursor's answer cannot carry: {', '.join(expected['not_carried'])})"
            bare_decision = expected["decision"] if expected else "-"
            print(f"{event['id']:<28} bare {bare_decision:<9} daemon {got['decision']:<9} {shown}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "claude-parity.json").write_text(json.dumps(rows, indent=1) + "\n")
    agreeing = sum(1 for r in rows if r["same"])
    print(f"{agreeing}/{len(rows)} events agree; details in {out / 'claude-parity.json'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.parity.claude",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("obtain", "record", "run"):
        p = sub.add_parser(name)
        p.add_argument("cache", type=Path, help="the cache directory (outside the project)")
        p.add_argument("--only", action="append", default=[], help="only this repository")
        if name == "obtain":
            p.add_argument("--source", default="https://github.com/{repo}.git",
                           help="URL or git dir template ({repo}, {owner}, {name})")  # fmt: skip
        if name == "run":
            p.add_argument("--out", type=Path, default=Path("parity-results"))
            p.add_argument("--runtime", default="runc", choices=["runc", "runsc"])
    args = parser.parse_args(argv)
    if args.command == "obtain":
        return cmd_obtain(args.cache, args.source, args.only)
    if args.command == "record":
        return cmd_record(args.cache, args.only)
    return cmd_run(args.cache, args.only, args.out, args.runtime)


if __name__ == "__main__":
    sys.exit(main())
