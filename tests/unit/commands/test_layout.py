"""The command layer is one folder: one module per top-level command, each adding itself."""

from __future__ import annotations

import argparse
import ast
import importlib
from pathlib import Path

import pytest

from cloudrunner import cli

COMMANDS_DIR = Path(cli.__file__).with_name("commands")


def test_every_command_is_one_module_of_the_folder() -> None:
    modules = {p.stem for p in COMMANDS_DIR.glob("*.py") if p.name != "__init__.py"}
    assert modules == set(cli.COMMANDS)


def test_the_package_holds_only_its_docstring() -> None:
    tree = ast.parse((COMMANDS_DIR / "__init__.py").read_text())
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
    assert ast.get_docstring(tree)


@pytest.mark.parametrize("name", cli.COMMANDS)
def test_each_module_adds_its_own_command_with_a_handler(name: str) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    importlib.import_module(f"cloudrunner.commands.{name}").add_parser(sub)
    assert list(sub.choices) == [name]
    leaves = [sub.choices[name]]
    while leaves:
        leaf = leaves.pop()
        nested = [a for a in leaf._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:
            leaves.extend(nested[0].choices.values())
        else:
            assert callable(leaf.get_default("handler")), (name, leaf.prog)
