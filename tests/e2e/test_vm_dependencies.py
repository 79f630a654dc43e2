"""`cloudrunner vm --check` names each missing dependency in one line, against the real
engine (cloudrunner/vm/dependencies.py): an engine that does not answer, a hook image the
engine does not have, a client that is not the compiled one; and none on a machine that has
them all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ci import missing as fail_in_ci

pytestmark = pytest.mark.docker

BIN = Path(sys.executable).parent


def _vm(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    base = [sys.executable, "-m", "cloudrunner", "vm", "--workspace", str(ws),
            "--state-dir", str(tmp_path / "s"), "--enterprise-hooks", str(tmp_path / "e.json"),
            "--agent-hooks", str(tmp_path / "hooks.json"),
            "--unit", str(tmp_path / "u")]  # fmt: skip
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDRUNNER_")}
    if not (tmp_path / "hooks.json").exists():
        subprocess.run(base, env=environ, capture_output=True, timeout=60, check=True)
    proc = subprocess.run([*base, "--check", *extra], env={**environ, **(env or {})},
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc.returncode, [x for x in proc.stdout.splitlines() if x.startswith("missing: ")]


def test_a_machine_with_everything_has_nothing_missing(tmp_path: Path) -> None:
    if not (BIN / "cloudrunner-hook").is_file():
        fail_in_ci("no compiled client beside this interpreter (scripts/setup builds it)")
    code, missing = _vm(tmp_path)
    assert (code, missing) == (0, [])


def test_each_missing_piece_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    python_client = BIN / "cloudrunner"
    code, missing = _vm(tmp_path, "--image", "cloudrunner/no-such-image:0",
                        "--client", str(python_client))  # fmt: skip
    assert code == 1
    assert len(missing) == 2, missing
    assert "cloudrunner/no-such-image:0 is not on the Docker engine" in missing[1]
    assert "`cloudrunner images build`" in missing[1]
    assert "cloudrunner-hook" in missing[0] and "--client PATH" in missing[0]

    code, missing = _vm(tmp_path, env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert code == 1
    engine = [x for x in missing if "Docker engine" in x]
    assert len(engine) == 1 and "apt-get install docker.io" in engine[0], missing
    # --check writes nothing: the agent's file written before is still there
    assert json.loads((tmp_path / "hooks.json").read_text())["hooks"]
