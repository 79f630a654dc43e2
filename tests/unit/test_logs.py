"""The one log channel: one line per event on stderr (never stdout), JSON when stderr is not
a terminal, the console renderer's one human line when it is; a bad level is one line."""

from __future__ import annotations

import json

import pytest

from cloudrunner.errors import CloudrunnerError
from cloudrunner.logs import configure_logging, get_logger


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
