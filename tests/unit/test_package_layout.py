"""The package's layout: sub-packages are reached through their `__init__`, no module name is
said twice, and the command layer is imported only from above it (cli.py)."""

from __future__ import annotations

import ast
import importlib
from collections import Counter
from pathlib import Path

import pytest

import cloudrunner

PACKAGE = Path(cloudrunner.__file__).parent
#: the sub-packages whose public names their `__init__` exports
PACKAGES = (
    "client",
    "daemon",
    "egress",
    "event",
    "images",
    "replay",
    "shell",
    "sources",
    "telemetry",
    "validate",
    "vm",
    "workspace",
)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[str]:
    """Every module `path` imports, at the top or inside a function, absolute names."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _exported(init: Path) -> list[str]:
    """The names of the `__all__` list of a package's `__init__`."""
    tree = ast.parse(init.read_text())
    return [
        element.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        and isinstance(node.value, ast.List)
        for element in node.value.elts
        if isinstance(element, ast.Constant) and isinstance(element.value, str)
    ]


def test_no_module_name_is_said_twice_outside_the_commands() -> None:
    names = Counter(p.name for p in _modules() if p.parent.name != "commands")
    twice = {name for name, count in names.items() if count > 1} - {"__init__.py"}
    assert twice == set(), sorted(twice)


@pytest.mark.parametrize("name", PACKAGES)
def test_callers_outside_a_package_import_its_init(name: str) -> None:
    folder = PACKAGE / name
    inner = {_dotted(p) for p in folder.glob("*.py") if p.name != "__init__.py"}
    assert inner, f"{folder} holds no module"
    #: a submodule imported only when needed, through the package (`from PKG import sub`) or
    #: inside the one function that needs it (the settings check an operator's hook_env
    #: entry with the event path's rules, which import the settings),
    #: and the submodules the `__init__` itself exports as modules (its `__all__` names them)
    lazy = {"cloudrunner.client.no_daemon", "cloudrunner.event.hook_env"} | {
        f"cloudrunner.{name}.{exported}" for exported in _exported(folder / "__init__.py")
    }
    reached = {
        (str(path.relative_to(PACKAGE.parent)), imported)
        for path in _modules()
        if folder not in path.parents
        for imported in _imports(path)
        if imported in inner - lazy
    }
    assert reached == set()


@pytest.mark.parametrize("name", PACKAGES)
def test_each_package_exports_its_public_names(name: str) -> None:
    tree = ast.parse((PACKAGE / name / "__init__.py").read_text())
    exported = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        and isinstance(node.value, ast.List)
    ]
    assert len(exported) == 1, f"cloudrunner/{name}/__init__.py has no __all__ list"
    assert exported[0].elts, f"cloudrunner/{name}/__init__.py exports nothing"
    assert ast.get_docstring(tree), f"cloudrunner/{name}/__init__.py says nothing of itself"


#: the most modules directly under cloudrunner/, its own __init__ and __main__ aside (issue 36)
MAX_TOP_LEVEL_MODULES = 12


def test_the_package_top_holds_at_most_twelve_modules() -> None:
    top = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in {"__init__.py", "__main__.py"}
    )
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_only_cli_imports_the_command_layer() -> None:
    above = {PACKAGE / "cli.py"}
    importers = {
        str(path.relative_to(PACKAGE.parent))
        for path in _modules()
        if path.parent.name != "commands" and path not in above
        and any(m == "cloudrunner.commands" or m.startswith("cloudrunner.commands.")
                for m in _imports(path))
    }  # fmt: skip
    assert importers == set()


def test_the_commands_import_one_another_without_a_circle() -> None:
    commands = {_dotted(p): p for p in (PACKAGE / "commands").glob("*.py")}
    edges = {
        name: {m for m in _imports(path) if m in commands and m != name}
        for name, path in commands.items()
    }
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        assert name not in trail, " -> ".join((*trail, name))
        if name in done:
            return
        for target in sorted(edges[name]):
            visit(target, (*trail, name))
        done.add(name)

    for name in sorted(edges):
        visit(name, ())


def _module_edges() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports: anywhere in it
    (a function's body, a type-checking block), `from PKG import sub` counting as `sub`."""
    modules = {_dotted(p): p for p in _modules()}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(node.module)
        edges[name] = (found & modules.keys()) - {name}
    return edges


def test_no_module_imports_itself_through_others() -> None:
    """No import circle anywhere in the package (issue 36 found claude_io -> plan -> results
    -> ..., errors <-> events, settings <-> sources and pipeline -> replay -> worker)."""
    edges = _module_edges()
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        assert name not in trail, " -> ".join((*trail[trail.index(name) :], name))
        if name in done:
            return
        for target in sorted(edges[name]):
            visit(target, (*trail, name))
        done.add(name)

    for name in sorted(edges):
        visit(name, ())


@pytest.mark.parametrize("name", ["audit", "daemon", "egress", "event"])
def test_each_lazily_exported_name_resolves_to_what_its_module_holds(name: str) -> None:
    package = importlib.import_module(f"cloudrunner.{name}")
    where: dict[str, str] = package._WHERE
    assert sorted(where) == sorted(package.__all__), "exported names and their places differ"
    for exported, place in where.items():
        module, _, attribute = place.partition(":")
        held = getattr(importlib.import_module(module), attribute or exported)
        assert getattr(package, exported) is held, f"cloudrunner.{name}.{exported}"
    with pytest.raises(AttributeError, match=f"cloudrunner.{name}' has no attribute 'nope'"):
        _ = package.nope
