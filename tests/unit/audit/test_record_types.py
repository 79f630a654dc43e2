"""Record kinds and their types: every kind has its fields, and a reader's misspelt key is a
mypy error as a writer's is (`[]` natively, `.get` through the project's mypy plugin)."""

from __future__ import annotations

import textwrap
import typing
from pathlib import Path

import pytest
from mypy import api as mypy_api

from cloudrunner.audit.bounds import ID_KEYS, UNCAPPED_KEYS
from cloudrunner.audit.records import (
    FIELDS,
    STORED,
    AnyRecord,
    Envelope,
    RecordKind,
    view,
)

ROOT = Path(__file__).resolve().parents[3]


def _keys(cls: typing.Any) -> set[str]:
    return set(cls.__required_keys__ | cls.__optional_keys__)


def test_every_kind_has_its_fields_and_stored_type() -> None:
    assert set(FIELDS) == set(RecordKind)
    assert set(STORED) == set(RecordKind)
    for kind in RecordKind:
        assert _keys(STORED[kind]) == _keys(Envelope) | _keys(FIELDS[kind]), kind


def test_a_kinds_fields_do_not_redefine_the_envelope() -> None:
    """The writer adds the envelope; a kind spelling one of its keys would shadow it."""
    for kind in RecordKind:
        assert not {"seq", "kind", "hash", "prev_hash"} & _keys(FIELDS[kind]), kind


def test_view_overloads_name_each_kinds_stored_type() -> None:
    returns = {}
    for overload in typing.get_overloads(view):
        hints = typing.get_type_hints(overload)
        (kind,) = typing.get_args(hints["kind"])
        (stored, _none) = typing.get_args(hints["return"])
        returns[kind] = stored
    assert returns == dict(STORED)


def test_any_record_names_only_fields_some_kind_has() -> None:
    known = set().union(*(_keys(fields) for fields in FIELDS.values())) | _keys(Envelope)
    assert _keys(AnyRecord) <= known


def test_the_size_caps_name_fields_some_kind_has() -> None:
    """A misspelt key in the caps' sets would cap nothing (or leave a payload cut)."""
    known = set().union(*(_keys(fields) for fields in FIELDS.values()))
    assert known >= ID_KEYS | UNCAPPED_KEYS


def test_view_checks_the_kind_only() -> None:
    hook = {"kind": "hook", "seq": 3, "outcome": "ok"}
    assert view(hook, RecordKind.HOOK) is hook
    assert view(hook, RecordKind.DECISION) is None
    assert view({"kind": 7}, RecordKind.HOOK) is None
    assert view({}, RecordKind.HOOK) is None


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module's mypy runs (the first one checks the imports)."""
    return tmp_path_factory.mktemp("mypy-cache")


def _mypy(tmp_path: Path, cache: Path, body: str) -> tuple[str, int]:
    snippet = tmp_path / "reader.py"
    snippet.write_text(
        "from typing import Any\n"
        "from cloudrunner.audit.records import RecordKind, any_record, view\n\n"
        + textwrap.dedent(body)
    )
    out, err, status = mypy_api.run(
        [
            "--config-file", str(ROOT / "pyproject.toml"),
            "--cache-dir", str(cache),
            "--no-error-summary",
            str(snippet),
        ]
    )  # fmt: skip
    return out + err, status


@pytest.mark.parametrize(
    "line",
    [
        'hook["outcom"]',
        'hook.get("outcom")',
        'hook.get("outcom", "")',
        'any_record(r).get("comand")',
        'any_record(r)["seqq"]',
    ],
)
def test_a_misspelt_key_in_a_reader_is_a_mypy_error(
    tmp_path: Path, mypy_cache: Path, line: str
) -> None:
    out, status = _mypy(
        tmp_path,
        mypy_cache,
        f"""
        def read(r: dict[str, Any]) -> object:
            hook = view(r, RecordKind.HOOK)
            if hook is None:
                return None
            return {line}
        """,
    )
    assert status == 1, out
    assert "has no key" in out and "[typeddict-item]" in out, out


def test_the_right_keys_pass_mypy(tmp_path: Path, mypy_cache: Path) -> None:
    out, status = _mypy(
        tmp_path,
        mypy_cache,
        """
        def read(r: dict[str, Any]) -> object:
            hook = view(r, RecordKind.HOOK)
            if hook is None:
                return any_record(r).get("command")
            outcome: str | None = hook.get("outcome")
            return (hook["seq"], hook.get("time"), outcome, hook.get("duration_ms", 0.0))
        """,
    )
    assert status == 0, out


@pytest.mark.parametrize(
    ("line", "wrong"),
    [
        ("entry: Entry = (RecordKind.HOOK, hook)", False),
        ("entry: Entry = (RecordKind.DECISION, decision)", False),
        ("entry: Entry = (RecordKind.DECISION, hook)", True),
        ("entry: Entry = (RecordKind.HOOK, decision)", True),
        ("entry: Entry = (RecordKind.TORN_RECORD, hook)", True),
    ],
)
def test_a_kind_paired_with_another_kinds_fields_is_a_mypy_error(
    tmp_path: Path, mypy_cache: Path, line: str, wrong: bool
) -> None:
    out, status = _mypy(
        tmp_path,
        mypy_cache,
        f"""
        from cloudrunner.audit.records import DecisionFields, HookFields
        from cloudrunner.audit.records import Entry

        hook: HookFields = {{"outcome": "ok"}}
        decision: DecisionFields = {{"blocked_by": None}}
        {line}
        """,
    )
    assert status == (1 if wrong else 0), out
    if wrong:
        assert "Incompatible types in assignment" in out, out
