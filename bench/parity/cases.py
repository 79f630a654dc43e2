"""The parity data set: repositories (MANIFEST.tsv) and their events (cases.json).

Only what the data set's authors wrote is read here: names, commits, events, the answers the
hooks gave when run bare. The repositories themselves live in the cache, never in the project.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "MANIFEST.tsv"
CASES = "cases.json"
ROOT_MARK = "{ROOT}"
HOME_MARK = "{HOME}"


class DataSetError(Exception):
    """The parity data set is missing or malformed; the message says where and what to do."""


@dataclass(frozen=True)
class Event:
    id: str
    event: str
    pre: str | None
    post: str | None
    payload: Mapping[str, Any]
    note: str
    #: only these answer keys are comparable (None: the whole answer)
    compare: tuple[str, ...] | None
    expect: Mapping[str, Any]

    @property
    def expected_hooks(self) -> list[Mapping[str, Any]]:
        return list(self.expect.get("hooks") or [])

    @property
    def expected_answer(self) -> Mapping[str, Any]:
        return dict(self.expect.get("answer") or {})

    @property
    def expected_post(self) -> str | None:
        value = self.expect.get("post_stdout")
        return None if value is None else str(value)


@dataclass(frozen=True)
class Repository:
    name: str
    repo: str
    commit: str
    license: str
    layout: str
    requires: tuple[str, ...]
    events: tuple[Event, ...]

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def short(self) -> str:
        return self.repo.split("/", 1)[1]


def fill(value: Any, root: str, home: str | None = None) -> Any:
    """`value` with `{ROOT}` (and `{HOME}`) replaced in every string, keys included."""
    if isinstance(value, str):
        out = value.replace(ROOT_MARK, root)
        return out if home is None else out.replace(HOME_MARK, home)
    if isinstance(value, list):
        return [fill(v, root, home) for v in value]
    if isinstance(value, dict):
        return {fill(k, root, home): fill(v, root, home) for k, v in value.items()}
    return value


def mark(value: Any, root: str, home: str | None = None) -> Any:
    """The inverse of `fill`: the machine's paths back to their placeholders, so answers
    made in different directories compare. The longer path goes first (HOME may be under
    ROOT's parent, or the other way round)."""
    pairs = sorted(
        [(root, ROOT_MARK)] + ([(home, HOME_MARK)] if home else []),
        key=lambda p: -len(p[0]),
    )
    if isinstance(value, str):
        for path, placeholder in pairs:
            value = value.replace(path, placeholder)
        return value
    if isinstance(value, list):
        return [mark(v, root, home) for v in value]
    if isinstance(value, dict):
        return {mark(k, root, home): mark(v, root, home) for k, v in value.items()}
    return value


def _event(raw: Mapping[str, Any], where: str) -> Event:
    try:
        compare = raw.get("compare")
        return Event(
            id=str(raw["id"]),
            event=str(raw["event"]),
            pre=raw.get("pre"),
            post=raw.get("post"),
            payload=dict(raw["payload"]),
            note=str(raw.get("note") or ""),
            compare=None if compare is None else tuple(str(k) for k in compare),
            expect=dict(raw["expect_bare"]),
        )
    except (KeyError, TypeError) as exc:
        raise DataSetError(
            f"{where}: an event lacks {exc} (is this the parity cases.json?)"
        ) from None


def parse(manifest_text: str, cases: Sequence[Mapping[str, Any]], where: str) -> list[Repository]:
    """The repositories of the data set, in cases.json order."""
    rows = {
        row["name"]: row
        for row in csv.DictReader(manifest_text.splitlines(), delimiter="\t")
        if row.get("name")
    }
    out = []
    for index, raw in enumerate(cases):
        name = str(raw.get("name") or "")
        row = rows.get(name)
        if row is None:
            raise DataSetError(f"{where}: repository {name!r} (entry {index}) is not in {MANIFEST}")
        if row["commit"] != raw.get("commit"):
            raise DataSetError(
                f"{where}: {name}: {MANIFEST} says commit {row['commit']}, {CASES} "
                f"says {raw.get('commit')}"
            )
        out.append(
            Repository(
                name=name,
                repo=row["repo"],
                commit=row["commit"],
                license=row.get("license") or "",
                layout=str(raw.get("layout") or ""),
                requires=tuple(str(r) for r in raw.get("requires") or ()),
                events=tuple(
                    _event(e, f"{where}: {name} event {i}") for i, e in enumerate(raw["events"])
                ),
            )
        )
    return out


def load(directory: Path) -> list[Repository]:
    """Read MANIFEST.tsv and cases.json from `directory`."""
    try:
        manifest = (directory / MANIFEST).read_text(encoding="utf-8")
        cases = json.loads((directory / CASES).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataSetError(
            f"{exc.filename} is missing: fill the cache first "
            "(python -m bench.parity.obtain CACHE_DIR --parity DIR)"
        ) from None
    except ValueError as exc:
        raise DataSetError(f"{directory / CASES} is not JSON ({exc})") from None
    if not isinstance(cases, list):
        raise DataSetError(f"{directory / CASES}: expected a list of repositories")
    return parse(manifest, cases, str(directory / CASES))
