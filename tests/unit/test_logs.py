"""The one log channel: one line per event on stderr (never stdout), JSON when stderr is not
a terminal, the console renderer's one human line when it is; a bad level is one line. Every
logger of the package comes from `logs.get_logger`, and every log event's name has one
style (`area.snake_case`)."""

from __future__ import annotations

import ast
import json
import re

import pytest

from cloudrunner.errors import CloudrunnerError
from cloudrunner.logs import configure_logging, get_logger
from tests.support.package_sources import PACKAGE, package_sources

LOGS = PACKAGE / "logs.py"
#: a log event's name: the part of the system, a dot, what happened in snake_case
NAME_STYLE = re.compile(r"[a-z]+\.[a-z][a-z0-9]*(_[a-z0-9]+)*")
LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "msg"}


def test_json_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")
    get_logger("cloudrunner.test").warning("test.said", detail="two\nlines", n=3)
    out, err = capsys.readouterr()
    assert out == ""  # stdout is the agent's answer and nothing else
    (line,) = err.splitlines()
    logged = json.loads(line)
    assert logged["event"] == "test.said" and logged["level"] == "warning"
    assert logged["detail"] == "two\nlines" and logged["n"] == 3 and "timestamp" in logged


def test_one_human_line_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", human=True)
    get_logger("cloudrunner.test").warning("test.said", detail="the spool was taken")
    (line,) = capsys.readouterr().err.splitlines()
    assert "[warning" in line and "test.said" in line and "the spool was taken" in line
    assert "\x1b[" not in line  # no colour codes in a journal that captured a tty
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_the_level_filters(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("error")
    get_logger("cloudrunner.test").warning("test.hidden")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("bad", ["loud", "warning\nerror", "", "-1"])
def test_a_bad_level_is_one_line(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUDRUNNER_LOG_LEVEL", bad or " ")
    with pytest.raises(CloudrunnerError, match="is not a log level"):
        configure_logging()


def _is_get_logger(node: ast.expr) -> bool:
    """`get_logger(...)` or `logs.get_logger(...)`."""
    return isinstance(node, ast.Call) and ast.unparse(node.func) in {
        "get_logger", "logs.get_logger", "cloudrunner.logs.get_logger",
    }  # fmt: skip


def log_events(source: str) -> list[tuple[int, ast.expr | None]]:
    """Every log call of a module and its event-name argument: calls on a name bound to a
    logger from `get_logger`, on `get_logger(...)` itself, and the sandbox's
    `note(level, event, ...)`."""
    tree = ast.parse(source)
    loggers = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_get_logger(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found: list[tuple[int, ast.expr | None]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in LEVELS:
            receiver = func.value
            if (isinstance(receiver, ast.Name) and receiver.id in loggers) or _is_get_logger(
                receiver
            ):
                found.append((node.lineno, node.args[0] if node.args else None))
        elif isinstance(func, ast.Name) and func.id == "note":
            found.append((node.lineno, node.args[1] if len(node.args) > 1 else None))
    return found


def _package_log_events() -> list[tuple[str, int, ast.expr | None]]:
    return [
        (where, line, name) for where, text in package_sources() for line, name in log_events(text)
    ]


def test_every_log_event_name_has_the_one_style() -> None:
    events = _package_log_events()
    bad = [
        f"{where}:{line}: {ast.unparse(name) if name is not None else '(no name)'}"
        for where, line, name in events
        if not (
            isinstance(name, ast.Constant)
            and isinstance(name.value, str)
            and NAME_STYLE.fullmatch(name.value)
        )
    ]
    assert bad == []
    # the scan reads the package's log calls: the daemon's, the worker's, the sandbox's
    names = {n.value for _, _, n in events if isinstance(n, ast.Constant)}
    assert {"daemon.engine_unreachable", "worker.event_unrecorded", "sandbox.remove_failed"} <= (
        names
    )


@pytest.mark.parametrize(
    ("source", "verdict"),
    [
        ('log = get_logger("x")\nlog.warning("daemon.engine_unreachable")', True),
        ('_log = logs.get_logger("x")\n_log.info("server.client_gone", a=1)', True),
        ('get_logger("x").warning("worker.audit_torn")', True),
        ('note("warning", "sandbox.remove_failed", container="c")', True),
        ('log = get_logger("x")\nlog.warning("event-unrecorded")', False),
        ('get_logger("x").error("reap-failed")', False),
        ('note("warning", "Sandbox.Removed")', False),
        ('log = get_logger("x")\nlog.warning(f"daemon.{what}")', False),
        ('log = get_logger("x")\nlog.warning("nodot")', False),
    ],
)
def test_the_style_check_reads_each_kind_of_call(source: str, verdict: bool) -> None:
    ((_, name),) = log_events(source)
    ok = isinstance(name, ast.Constant) and bool(NAME_STYLE.fullmatch(str(name.value)))
    assert ok is verdict


def test_every_logger_comes_from_get_logger() -> None:
    """No module makes its own structlog logger (it would skip `get_logger`'s default
    configuration: structlog's own default prints to stdout, the agent's answer)."""
    direct = []
    for where, text in package_sources(LOGS):
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "get_logger"
                and ast.unparse(node.value) == "structlog"
            ) or (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("structlog")
                and any(alias.name == "get_logger" for alias in node.names)
            ):
                direct.append(f"{where}:{node.lineno}")
    assert direct == []
