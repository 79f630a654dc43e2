"""The development guide's map of the package names every sub-package and every module
directly under cloudrunner/, so the map cannot fall behind a layout change unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

import cloudrunner

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(cloudrunner.__file__).parent


def _map() -> str:
    guide = (REPO / "docs" / "development.md").read_text()
    start = guide.index("## Layout")
    return guide[start : guide.index("\n## ", start + 1)]


def test_the_map_names_each_sub_package_and_top_module() -> None:
    entries = set(re.findall(r"^  ([a-z_]+)(?:/|\.py)", _map(), re.MULTILINE))
    parts = {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists())
        or (p.suffix == ".py" and p.name not in {"__init__.py", "__main__.py"})
    }
    assert parts - entries == set(), "not on the development guide's map"


def test_the_map_names_no_module_that_is_gone() -> None:
    named = set(re.findall(r"^  ([a-z_]+)/", _map(), re.MULTILINE))
    gone = {name for name in named if not (REPO / name).exists() and not (PACKAGE / name).exists()}
    assert gone == set()
