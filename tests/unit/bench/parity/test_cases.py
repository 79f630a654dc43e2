"""Reading the parity data set, and the {ROOT}/{HOME} placeholders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.parity.cases import DataSetError, fill, load, mark
from tests.unit.bench.parity.helpers import event, repo_entry, write_data_set


def test_repositories_come_in_cases_order_with_their_events(tmp_path: Path) -> None:
    data = write_data_set(
        tmp_path,
        [repo_entry("b__two"), repo_entry("a__one", events=[event("x", compare=None)])],
    )
    repos = load(data)
    assert [r.name for r in repos] == ["b__two", "a__one"]
    assert repos[0].owner == "b" and repos[0].short == "two"
    assert repos[1].events[0].id == "x"
    assert repos[1].events[0].payload["generation_id"] == "gen-x"


def test_a_commit_that_disagrees_with_the_manifest_is_refused(tmp_path: Path) -> None:
    data = write_data_set(tmp_path, [repo_entry("a__one")])
    cases = json.loads((data / "cases.json").read_text())
    cases[0]["commit"] = "b" * 40
    (data / "cases.json").write_text(json.dumps(cases))
    with pytest.raises(DataSetError, match=r"MANIFEST\.tsv says commit a{40}"):
        load(data)


def test_a_repository_missing_from_the_manifest_is_named(tmp_path: Path) -> None:
    data = write_data_set(tmp_path, [repo_entry("a__one")])
    (data / "MANIFEST.tsv").write_text("name\trepo\tcommit\tlicense\thooks\n")
    with pytest.raises(DataSetError, match=r"'a__one'.*not in MANIFEST\.tsv"):
        load(data)


def test_a_missing_data_set_says_how_to_fill_the_cache(tmp_path: Path) -> None:
    with pytest.raises(DataSetError, match=r"bench\.parity\.obtain"):
        load(tmp_path / "nowhere")


def test_an_event_without_its_answers_is_named(tmp_path: Path) -> None:
    broken = event("e1")
    del broken["expect_bare"]
    data = write_data_set(tmp_path, [repo_entry("a__one", events=[broken])])
    with pytest.raises(DataSetError, match=r"a__one event 0.*expect_bare"):
        load(data)


def test_placeholders_are_filled_everywhere_keys_included() -> None:
    value = {"{ROOT}/x": ["{ROOT}", {"h": "{HOME}/.cfg"}], "n": 3, "none": None}
    assert fill(value, "/w/r", "/h") == {"/w/r/x": ["/w/r", {"h": "/h/.cfg"}], "n": 3, "none": None}
    assert fill("{HOME}", "/w") == "{HOME}"  # no home given: left alone


def test_marking_prefers_the_longer_path_when_one_contains_the_other() -> None:
    # HOME inside ROOT's directory: the longer path must be replaced first
    assert mark("/w/r/home/x and /w/r/y", "/w/r", "/w/r/home") == "{HOME}/x and {ROOT}/y"


_paths = st.text(alphabet="abc/", min_size=1, max_size=8).map(lambda s: "/tmp/" + s)


@given(st.text(alphabet="xyz {}ROOTHME/", max_size=40))
def test_mark_undoes_fill_for_text_without_the_paths(text: str) -> None:
    root = "/tmp/parity-root-Q"
    if root in text or "{HOME}" in text:
        return
    assert mark(fill(text, root), root) == text
