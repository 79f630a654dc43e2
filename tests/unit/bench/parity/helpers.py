"""A small, made-up parity data set (never the real repositories) for the pure tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MANIFEST_HEADER = "name\trepo\tcommit\tlicense\thooks\n"


def event(
    event_id: str,
    name: str = "beforeShellExecution",
    *,
    fields: dict[str, Any] | None = None,
    hooks: list[dict[str, Any]] | None = None,
    answer: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    payload = {
        "conversation_id": "conv-x",
        "generation_id": f"gen-{event_id}",
        "hook_event_name": name,
        "cursor_version": "1.7.52",
        "workspace_roots": ["{ROOT}"],
        "transcript_path": None,
        **(fields or {}),
    }
    return {
        "id": event_id,
        "event": name,
        "fields": fields or {},
        "pre": extra.pop("pre", None),
        "payload": payload,
        "note": "",
        "expect_bare": {"hooks": hooks or [], "answer": answer or {}, **extra},
    }


def write_data_set(directory: Path, repos: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [MANIFEST_HEADER] + [
        f"{r['name']}\t{r['repo']}\t{r['commit']}\tMIT\tbeforeShellExecution\n" for r in repos
    ]
    (directory / "MANIFEST.tsv").write_text("".join(lines))
    (directory / "cases.json").write_text(json.dumps(repos))
    return directory


def repo_entry(name: str, commit: str = "a" * 40, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "repo": name.replace("__", "/"),
        "commit": commit,
        "layout": "as committed",
        "requires": ["bash"],
        "events": [event("e1")],
        **extra,
    }
