"""`cloudrunner vm`'s writers against hostile input: workspace, state-directory and socket
paths with a newline, `$`, `%`, `\\`, quotes, blanks and non-ASCII are written so that
systemd reads back exactly those paths (tests/support/systemd_unit.py, systemd's rules, and
`systemd-analyze verify` where systemd is installed), or refused in one line naming the
character; extreme hook timeouts are written as finite strict-JSON numbers or refused in one
line; and a fuzz test of both writers over any path and any loaded hooks."""

from __future__ import annotations

import json
import math
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.events import CLOUD_EVENTS
from cloudrunner.settings import Settings, load_settings
from cloudrunner.vm import MAX_AGENT_TIMEOUT_S, Client, VmSetupError
from cloudrunner.vm import provisioning as vm_setup
from tests.support.systemd_unit import environment, exec_argv, parse_unit, specifiers

DESCRIPTION = "cloudrunner: agent hooks for the workspace {} (cloudrunner serve)"
UNIT_KEYS = {
    "Unit.Description", "Unit.Wants", "Unit.After", "Service.Type", "Service.ExecStart",
    "Service.Environment", "Service.Restart", "Service.RestartSec", "Service.KillSignal",
    "Service.TimeoutStopSec", "Service.LimitNOFILE", "Install.WantedBy",
}  # fmt: skip


def _settings(base: Path, name: str, **overrides: Any) -> Settings:
    return load_settings(
        environ={},
        overrides={"state_dir": f"{base}/state {name}", "workspace.path": f"{base}/ws {name}",
                   "server.socket": f"{base}/sock {name}/cloudrunner.sock", **overrides},
    )  # fmt: skip


def _unit(settings: Settings) -> tuple[str, list[str]]:
    argv = vm_setup.serve_argv(settings, "/opt/cr/bin/cloudrunner", ["--isolation", "session"])
    return vm_setup.systemd_unit(settings, argv, None), argv


def _reads_back(text: str, settings: Settings, argv: list[str]) -> None:
    """systemd's reading of the unit gives exactly the argv, the state directory and the
    workspace, and no key the writer did not mean (no injected directive)."""
    unit = parse_unit(text)
    assert set(unit.keys) == UNIT_KEYS, sorted(unit.keys)
    assert exec_argv(unit.one("Service.ExecStart")) == argv
    assert environment(unit.one("Service.Environment")) == {
        "CLOUDRUNNER_STATE_DIR": str(settings.state_dir)
    }
    assert specifiers(unit.one("Unit.Description")) == DESCRIPTION.format(settings.workspace.path)


def _verify(tmp_path: Path, text: str) -> None:
    """systemd-analyze verify, where systemd is installed."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return
    path = tmp_path / "cloudrunner.service"
    path.write_text(text, encoding="utf-8")
    proc = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    problems = [x for x in proc.stderr.splitlines()
                if x.strip() and "docker.service" not in x and "/opt/cr/bin" not in x]  # fmt: skip
    assert problems == [], proc.stderr


WRITTEN = {
    "dollar": "a$HOME${PATH}$$b",
    "percent": "a%h%%b%",
    "backslash": "a\\b\\",
    "trailing-backslash": "ab\\\\",
    "double-quote": 'a"b',
    "single-quote": "a'b",
    "blanks": " a  b ",
    "semicolon": "a ; b;",
    "non-ascii": "ünïcødé 日本 🦀",
    "escape-lookalikes": "\\n\\x41\\101%n$n",
    "directive-lookalike": "x ExecStartPre=/bin/touch /tmp/pwned",
}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_a_path_systemd_can_carry_reads_back_exactly(tmp_path: Path, name: str) -> None:
    settings = _settings(tmp_path, WRITTEN[name])
    text, argv = _unit(settings)
    assert str(settings.workspace.path).endswith(WRITTEN[name].rstrip("/"))
    _reads_back(text, settings, argv)
    _verify(tmp_path, text)


REFUSED = {
    "newline-directive": ("x\nExecStartPre=/bin/touch /tmp/pwned", "a newline (U+000A)"),
    "carriage-return": ("x\rb", "a carriage return (U+000D)"),
    "tab": ("a\tb", "a tab (U+0009)"),
    "escape": ("a\x1b[31m", "a control character (U+001B)"),
    "del": ("a\x7fb", "a control character (U+007F)"),
    "c1": ("a\x85b", "a control character (U+0085)"),
    "not-utf-8": ("a\udcffb", "the byte 0xff, which is not UTF-8"),
}


@pytest.mark.parametrize("where", ["workspace.path", "state_dir", "server.socket"])
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_path_systemd_cannot_carry_is_refused_in_one_line(
    tmp_path: Path, name: str, where: str
) -> None:
    value, said = REFUSED[name]
    settings = _settings(tmp_path, "plain", **{where: f"{tmp_path}/{value}/x"})
    with pytest.raises(VmSetupError) as caught:
        _unit(settings)
    message = caught.value.message
    assert "\n" not in message and said in message and "systemd unit" in message


def test_a_user_name_cannot_inject_a_directive(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "plain")
    argv = vm_setup.serve_argv(settings, "/opt/cr/bin/cloudrunner", [])
    with pytest.raises(VmSetupError, match="is not a user name"):
        vm_setup.systemd_unit(settings, argv, "agent\nExecStartPre=/bin/sh")
    assert "User=agent\n" in vm_setup.systemd_unit(settings, argv, "agent")


def test_an_infinite_drain_timeout_is_refused_not_a_crash(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "plain", **{"server.drain_timeout_s": "inf"})
    with pytest.raises(VmSetupError, match="drain timeout inf"):
        _unit(settings)


# --------------------------------------------------------------------------- timeouts


def _hooks_file(path: Path, timeouts: list[str]) -> Path:
    """A hooks file whose stop hooks have these timeouts, written as raw JSON text (so
    `1e400`, `Infinity` and `NaN` reach the loader as a file would give them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = ", ".join(
        f'{{"command": "./h{i}.sh", "timeout": {t}}}' for i, t in enumerate(timeouts)
    )
    path.write_text(f'{{"version": 1, "hooks": {{"stop": [{entries}]}}}}')
    return path


TIMEOUTS = {
    "1e308-in-two-sources": (["1e308"], ["1e308"]),
    "1e400": (["1e400"], []),
    "infinity": (["Infinity"], []),
    "minus-infinity": (["-Infinity"], []),
    "nan": (["NaN"], []),
    "negative": (["-5"], ["-1e308"]),
    "just-over": ([str(MAX_AGENT_TIMEOUT_S)], []),
    "zero": (["0"], ["1e-320"]),
    "many-long-hooks": (["86400"] * 40, ["86400"] * 40),
}


@pytest.mark.parametrize("name", sorted(TIMEOUTS))
def test_an_extreme_timeout_is_written_finite_or_refused_in_one_line(
    tmp_path: Path, name: str
) -> None:
    enterprise, project = TIMEOUTS[name]
    ent = _hooks_file(tmp_path / "ent" / "hooks.json", enterprise)
    _hooks_file(tmp_path / "ws plain" / ".cursor" / "hooks.json", project)
    settings = _settings(tmp_path, "plain", **{"sources.enterprise_hooks": str(ent)})
    try:
        made = vm_setup.plan(settings)
    except VmSetupError as exc:
        assert "\n" not in exc.message and "timeout" in exc.message
        assert "stop" in exc.message
        return
    document = vm_setup.agent_hooks(made.needs, _client(tmp_path), settings.socket_path)
    text = json.dumps(document, allow_nan=False)  # strict JSON, or this raises
    for entries in json.loads(text)["hooks"].values():
        timeout = entries[0]["timeout"]
        assert isinstance(timeout, int) and 0 < timeout <= MAX_AGENT_TIMEOUT_S


def test_extreme_timeouts_through_the_command_exit_with_one_line(tmp_path: Path) -> None:
    """The issue's case, end to end: `cloudrunner vm` with a 1e308 s hook in two sources
    exits with one line, not 70 and a traceback, and writes nothing."""
    ent = _hooks_file(tmp_path / "ent" / "hooks.json", ["1e308"])
    workspace = tmp_path / "ws"
    _hooks_file(workspace / ".cursor" / "hooks.json", ["1e308"])
    agent = tmp_path / "agent" / "hooks.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cloudrunner", "vm", "--workspace", str(workspace),
         "--state-dir", str(tmp_path / "state"), "--enterprise-hooks", str(ent),
         "--agent-hooks", str(agent), "--unit", str(tmp_path / "u.service")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode not in (0, 70), proc.stderr
    lines = [x for x in proc.stderr.splitlines() if not x.startswith("cloudrunner: note:")]
    assert len(lines) == 1 and "timeout" in lines[0] and "Traceback" not in proc.stderr
    assert not agent.exists()


def test_a_non_finite_timeout_in_an_existing_agent_file_is_a_fault(tmp_path: Path) -> None:
    needs = [vm_setup.EventNeed(e, 90, False, None) for e in CLOUD_EVENTS]
    client = _client(tmp_path)
    for value in (math.inf, math.nan):
        document = vm_setup.agent_hooks(needs, client, tmp_path / "s.sock")
        document["hooks"]["stop"][0]["timeout"] = value
        faults = vm_setup.check(json.loads(json.dumps(document)), needs)
        assert any(f.startswith("stop: timeout") and "not a finite" in f for f in faults)


def _client(tmp_path: Path) -> Client:
    binary = tmp_path / "bin" / "cloudrunner-hook"
    binary.parent.mkdir(exist_ok=True, parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return Client((str(binary), "hook"), compiled=True)


# --------------------------------------------------------------------------- fuzz

_SEGMENT = st.text(
    st.characters(exclude_characters="/\x00", exclude_categories=("Cs",)), min_size=1, max_size=12
).filter(lambda s: s not in (".", ".."))
_TIMEOUT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from(["1e400", "-1e400", "Infinity", "NaN", "1e308"]),
)
_HOOK = st.fixed_dictionaries(
    {"command": st.text(min_size=1, max_size=20)},
    optional={"timeout": _TIMEOUT, "failClosed": st.booleans()},
)
_HOOKS = st.dictionaries(st.sampled_from(CLOUD_EVENTS), st.lists(_HOOK, max_size=3), max_size=3)


def _dump(hooks: dict[str, list[dict[str, Any]]]) -> str:
    """JSON text as a hooks file could hold it: huge integers, NaN and Infinity included."""
    parts = []
    for event, entries in hooks.items():
        items = []
        for entry in entries:
            fields = [f'"command": {json.dumps(entry["command"])}']
            if "timeout" in entry:
                t = entry["timeout"]
                fields.append(f'"timeout": {t if isinstance(t, str) else json.dumps(t)}')
            if "failClosed" in entry:
                fields.append(f'"failClosed": {json.dumps(entry["failClosed"])}')
            items.append("{" + ", ".join(fields) + "}")
        parts.append(f"{json.dumps(event)}: [{', '.join(items)}]")
    return '{"version": 1, "hooks": {' + ", ".join(parts) + "}}"


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(segments=st.lists(_SEGMENT, min_size=1, max_size=3), enterprise=_HOOKS, project=_HOOKS)
# found by this test: a timeout refusal named a hooks file whose path held a newline
@example(segments=["\n"], enterprise={},
         project={"preToolUse": [{"command": "0", "timeout": 2147484.0}]})  # fmt: skip
def test_any_path_and_any_hooks_give_files_that_read_back_or_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    segments: list[str],
    enterprise: dict[str, list[dict[str, Any]]],
    project: dict[str, list[dict[str, Any]]],
) -> None:
    base = tmp_path_factory.mktemp("fuzz")
    ent = base / "ent" / "hooks.json"
    ent.parent.mkdir()
    ent.write_text(_dump(enterprise))
    workspace = base / "ws" / "/".join(segments)
    workspace.mkdir(parents=True)
    (workspace / ".cursor").mkdir()
    (workspace / ".cursor" / "hooks.json").write_text(_dump(project))
    try:
        settings = load_settings(
            environ={},
            overrides={"state_dir": f"{base}/state/{segments[-1]}",
                       "workspace.path": str(workspace), "sources.enterprise_hooks": str(ent)},
        )  # fmt: skip
    except CloudrunnerError as exc:
        assert "\n" not in exc.message.strip()
        return
    try:
        made = vm_setup.plan(settings)
        client = _client(base)
        document = vm_setup.agent_hooks(made.needs, client, settings.socket_path)
        text, argv = _unit(settings)
    except VmSetupError as exc:
        assert "\n" not in exc.message and exc.message
        return
    hooks_text = json.dumps(document, indent=2, allow_nan=False)
    read = json.loads(hooks_text)["hooks"]
    assert set(read) == set(CLOUD_EVENTS)
    for need in made.needs:
        (entry,) = read[need.event]
        assert shlex.split(entry["command"]) == [
            client.argv[0],
            "hook",
            need.event,
            "--socket",
            str(settings.socket_path),
        ]
        assert isinstance(entry["timeout"], int) and 0 < entry["timeout"] <= MAX_AGENT_TIMEOUT_S
        assert entry.get("failClosed", False) is need.fail_closed
    _reads_back(text, settings, argv)


@pytest.mark.parametrize(("name", "said"), [("cloud runner", "' '"), ("cr%i", "'%'"),
                                             ("cr:link", "':'"), ("état", "'é'")])  # fmt: skip
def test_a_state_directory_name_statedirectory_cannot_carry_is_refused(
    name: str, said: str
) -> None:
    settings = load_settings(
        environ={}, overrides={"state_dir": f"/var/lib/{name}", "workspace.path": "/srv/ws"}
    )
    with pytest.raises(VmSetupError) as caught:
        _unit(settings)
    assert "StateDirectory=" in caught.value.message and said in caught.value.message


def test_a_plain_state_directory_under_var_lib_is_made_by_systemd() -> None:
    settings = load_settings(
        environ={}, overrides={"state_dir": "/var/lib/cloudrunner", "workspace.path": "/srv/ws"}
    )
    text, _ = _unit(settings)
    assert "StateDirectory=cloudrunner\n" in text


@pytest.mark.parametrize("value", [-(10**400), 10**400, -1e308, 0, -0.0, 1e-300])
def test_check_names_any_number_as_a_timeout_without_raising(tmp_path: Path, value: Any) -> None:
    needs = [vm_setup.EventNeed(e, 90, False, None) for e in CLOUD_EVENTS]
    document = vm_setup.agent_hooks(needs, _client(tmp_path), tmp_path / "s.sock")
    document["hooks"]["stop"][0]["timeout"] = value
    faults = vm_setup.check(document, needs)
    assert all("\n" not in f for f in faults)
    assert any(f.startswith("stop: timeout") for f in faults) is (value < 90)


@pytest.mark.parametrize(
    "text", ["[" * 200_000, '{"hooks": {"stop": [{"timeout": ' + "9" * 5000 + "}]}}", "\udcff"]
)
def test_an_unreadable_agent_file_is_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "hooks.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(VmSetupError) as caught:
        vm_setup.read_hooks_file(path)
    assert "\n" not in caught.value.message and str(path) in caught.value.message
