"""Every file of the shared corpus loads, or fails with the diagnostic its table row names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudrunner.protocol.config import parse_hooks_file
from cloudrunner.protocol.events import EVENTS
from tests.support.shared import corpus_dir
from tests.unit.corpus_verdicts import LOADS, REJECTED, VERDICTS


@pytest.fixture(scope="module")
def corpus() -> Path:
    return corpus_dir()


def test_the_table_covers_the_corpus(corpus: Path) -> None:
    files = {p.name for p in corpus.glob("*.json")}
    assert len(files) == 200
    assert files == set(VERDICTS)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_corpus_file_verdict(corpus: Path, name: str) -> None:
    data = (corpus / name).read_bytes()
    result = parse_hooks_file(data, file=name)
    expected = VERDICTS[name]
    errors = tuple(sorted({(d.code, d.pointer) for d in result.errors}, key=str))
    assert errors == expected.errors
    if expected.status == LOADS:
        assert result.config is not None
        loaded = sum(len(v) for v in result.config.hooks.values())
        assert loaded == expected.hooks
        # independent count: every entry under a known event of the raw JSON
        raw = json.loads(data)
        assert loaded == sum(len(v) for k, v in raw.get("hooks", {}).items() if k in EVENTS)
    else:
        assert expected.status == REJECTED
        assert result.config is None
        for d in result.errors:
            assert d.message and d.file == name
            # every error points somewhere: a line (syntax) or a JSON pointer
            assert d.line is not None or d.pointer is not None
