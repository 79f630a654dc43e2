"""`cloudrunner hook`'s command layer: its flags (by hand and by argparse) and the answer
by policy when no daemon answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudrunner.commands import hook


def test_fast_options_read_every_flag() -> None:
    options = hook.fast_hook_options(
        ["hook", "stop", "--socket", "/s", "--exit-code", "--fallback=in-process",
         "--fail-closed", "--config", "/c.toml", "--timeout", "7.5"]
    )  # fmt: skip
    assert options is not None
    assert (options.event, options.socket, options.exit_code, options.fallback) == (
        "stop", "/s", True, "in-process"
    )  # fmt: skip
    assert (options.fail_closed, options.config, options.timeout) == (True, "/c.toml", 7.5)


@pytest.mark.parametrize(
    "words",
    [
        ["hook"],
        ["hook", "--help"],
        ["hook", "stop", "--bogus"],
        ["hook", "stop", "--socket"],
        ["hook", "stop", "--timeout", "soon"],
        ["hook", "stop", "--fallback", "maybe"],
        ["hook", "stop", "--socket", "/s", "--url", "http://h:1"],
        ["health"],
    ],
)
def test_anything_unusual_goes_to_argparse_for_its_messages(words: list[str]) -> None:
    assert hook.fast_hook_options(words) is None


def test_argparse_names_a_bad_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        hook.main(["hook", "stop", "--fallback", "maybe"])
    assert exc.value.code == 64  # a usage error, as the compiled client says it
    assert "invalid choice: 'maybe'" in capsys.readouterr().err


def test_no_daemon_is_answered_by_policy_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import io
    import sys

    monkeypatch.delenv("CLOUDRUNNER_FALLBACK", raising=False)
    monkeypatch.delenv("CLOUDRUNNER_FAIL_CLOSED", raising=False)
    payload = b'{"hook_event_name": "beforeSubmitPrompt", "prompt": "hi"}'
    sock = str(tmp_path / "none.sock")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
    assert hook.main(["hook", "beforeSubmitPrompt", "--socket", sock]) == 0
    out, err = capfd.readouterr()
    assert out.strip() == '{"continue":true}'  # compact, byte for byte the compiled client's
    first, *notes = err.splitlines()
    assert "the socket does not exist" in first and "fail-open" in first
    # then why the policy could not decide, and why the spool could not take the event
    assert notes and all(note.startswith("cloudrunner: ") for note in notes)

    monkeypatch.setenv("CLOUDRUNNER_FAIL_CLOSED", "1")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
    assert hook.main(["hook", "beforeSubmitPrompt", "--socket", sock, "--exit-code"]) == 2
    out, err = capfd.readouterr()
    assert '"continue":false' in out and "fail-closed" in err
