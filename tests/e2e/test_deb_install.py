"""The Debian package on a clean bookworm machine: built once per session by
packaging/deb/build, installed into a container made from the project's own debootstrap
base (with what a VM has: Debian's python3, docker.io and systemd; run with `--network
none`), then the agent-VM quick start's commands run there exactly as
docs/quickstart/agent-vm.md gives them, the written files checked, and the unit's ExecStart
started as a real daemon that answers `cloudrunner-hook health` and an event. An upgrade
keeps the operator's edit of the settings (a conffile) and the audit chain; remove and purge
leave /var/lib/cloudrunner.

What a container cannot do, said rather than hidden: systemd is not PID 1 in it (that needs
a privileged container), so the quick start's `systemctl daemon-reload && systemctl enable
--now cloudrunner` is replaced by the unit's own ExecStart and Environment (after
`systemd-analyze verify` passes the unit); and no Docker engine runs in it, which `serve`
does not need to answer health or an event whose sources load no hook, and which `vm
--check` reports as missing. The image-building step needs the network, and is not run.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import shlex
import shutil
import subprocess
import tarfile
import tomllib
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest
from docker.models.containers import Container

from cloudrunner.images import BASE_IMAGE
from tests.support.doc_examples import blocks_named
from tests.support.docker_tracking import DockerTracker

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
RELEASE = "/root/release"  # the quick start's working directory: the .deb and SHA256SUMS
PID_FILE, LOG = "/run/cloudrunner-test.pid", "/var/log/cloudrunner-test.log"
START_BLOCK = "systemctl daemon-reload && systemctl enable --now cloudrunner"
#: what an agent's VM has before the package: Debian's python3, git, Docker's engine and
#: systemd (its tools), and the agent's checkout at /workspace
VM_DOCKERFILE = f"""FROM {BASE_IMAGE}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 git docker.io systemd \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \\
 && git init -q -b main /workspace \\
 && git -C /workspace -c user.name=agent -c user.email=agent@example.invalid \\
      commit -q --allow-empty -m checkout
"""


def project_version() -> str:
    """The project's one version (cloudrunner/version.py where it exists)."""
    script = ROOT / "cloudrunner" / "version.py"
    if script.is_file():
        return subprocess.run(["python3", str(script)], capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def build_debs(into: Path, version: str | None = None, lintian: bool = True) -> Path:
    """This machine's architecture's package, built by packaging/deb/build into `into`,
    with a SHA256SUMS as scripts/package writes it."""
    env = {**os.environ, "CLOUDRUNNER_DEB_ARCHS": ARCH}
    if version is not None:
        env["CLOUDRUNNER_DEB_VERSION"] = version
    if not lintian:
        env["CLOUDRUNNER_DEB_LINTIAN"] = "0"
    proc = subprocess.run(["bash", "packaging/deb/build", str(into)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200, check=False)  # fmt: skip
    if proc.returncode != 0:
        pytest.fail(f"packaging/deb/build failed:\n{proc.stderr[-4000:]}", pytrace=False)
    lines = [
        f"{hashlib.sha256(deb.read_bytes()).hexdigest()}  {deb.name}\n"
        for deb in sorted(into.glob("*.deb"))
    ]
    (into / "SHA256SUMS").write_text("".join(lines))
    return into


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Version N, checked by lintian as it is built: the release scripts/package makes once
    per test run (tests/support/packages.py, shared with the wheel's tests) where that
    helper exists, else this machine's .deb built here."""
    try:
        from tests.support.packages import built  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return build_debs(tmp_path_factory.mktemp("release with space"))
    packages = built()
    if ARCH not in packages.debs:
        pytest.fail(f"scripts/package made no .deb for {ARCH}:\n{packages.log[-3000:]}")
    return Path(packages.dist)


@pytest.fixture(scope="session")
def vm_image(docker_client: docker.DockerClient) -> Iterator[str]:
    """A clean bookworm VM's image, from the local debootstrap base (removed at the end;
    its layers stay as the build cache)."""
    tag = f"cloudrunner/deb-vm:test-{uuid.uuid4().hex[:10]}"
    try:
        docker_client.images.build(fileobj=io.BytesIO(VM_DOCKERFILE.encode()), tag=tag,
                                   rm=True, forcerm=True)  # fmt: skip
    except docker.errors.BuildError as exc:
        log = "".join(str(chunk.get("stream", "")) for chunk in exc.build_log)[-3000:]
        pytest.fail(f"building the VM image failed: {exc}\n{log}", pytrace=False)
    try:
        yield tag
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.images.remove(tag, noprune=True)


@pytest.fixture
def newer_release(release: Path, tmp_path: Path) -> Iterator[Future[Path]]:
    """Version N+1 (lintian skipped: N was checked), built by packaging/deb/build from the
    release's own wheel: once per run beside the release (tests/support/packages.py) where
    that helper exists, else here in the background while the test installs version N."""
    try:
        from tests.support.packages import upgrade_built  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        upgrade_built = None
    with ThreadPoolExecutor(max_workers=1) as pool:
        if upgrade_built is not None:
            yield pool.submit(upgrade_built)
            return
        into = tmp_path / "newer"
        into.mkdir()
        for wheel in release.glob(f"cloudrunner-*manylinux*_{platform.machine()}.whl"):
            shutil.copy2(wheel, into)  # packaging/deb/build takes the project's wheel from here
        yield pool.submit(build_debs, into, f"{project_version()}+upgrade1", lintian=False)


@dataclass
class Vm:
    container: Container

    def sh(self, script: str, *, workdir: str = RELEASE, ok: bool = True) -> tuple[int, str]:
        """A bash script as root, its exit code and output (stdout and stderr)."""
        code, out = self.container.exec_run(
            ["bash", "-c", "set -euo pipefail\n" + script], workdir=workdir
        )
        text = out.decode(errors="replace")
        if ok:
            assert code == 0, f"`{script}` exited {code}:\n{text[-3000:]}"
        return code, text

    def put(self, directory: str, files: list[Path]) -> None:
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            for path in files:
                tar.add(path, arcname=path.name)
        self.sh(f"mkdir -p {directory}", workdir="/")
        assert self.container.put_archive(directory, data.getvalue())

    def read(self, path: str) -> str:
        return self.sh(f"cat {shlex.quote(path)}")[1]

    def start_unit(self, unit: str = "/etc/systemd/system/cloudrunner.service") -> None:
        """The unit's ExecStart, with its Environment, as a real daemon in the background;
        returns once `cloudrunner-hook health` answers."""
        keys = unit_keys(self.read(unit))
        (exec_start,) = keys["Service.ExecStart"]
        argv = [w.replace("$$", "$").replace("%%", "%") for w in shlex.split(exec_start)]
        env = dict(shlex.split(e)[0].split("=", 1) for e in keys.get("Service.Environment", []))
        state = env.get("CLOUDRUNNER_STATE_DIR", "/var/lib/cloudrunner")
        self.sh(f"mkdir -p {state} && rm -f {PID_FILE}")  # StateDirectory= makes it
        script = f"echo $$ > {PID_FILE}; exec {shlex.join(argv)} >>{LOG} 2>&1"
        self.container.exec_run(["bash", "-c", script], environment=env, detach=True)
        # bounded: the daemon answers within seconds, or has exited and its log says why
        for _ in range(600):
            exited = f'[ -s {PID_FILE} ] && ! kill -0 "$(cat {PID_FILE})" 2>/dev/null && exit 9'
            code, _ = self.sh(f"cloudrunner-hook health && exit 0; {exited}; exit 1", ok=False)
            if code == 0:
                return
            if code == 9:
                break
        pytest.fail(f"the daemon never answered:\n{self.read(LOG)}")

    def stop_daemon(self) -> None:
        """SIGTERM, as systemd stops it, and wait for its exit (tail --pid: no polling)."""
        self.sh(f"pid=$(cat {PID_FILE}); kill -TERM $pid; tail --pid=$pid -f /dev/null")
        assert "cloudrunner: stopped" in self.read(LOG)

    def send(self, event: str) -> dict[str, object]:
        """One event through the agent's own hooks file's command for it."""
        hooks = json.loads(self.read("/etc/cursor/hooks.json"))["hooks"]
        command = hooks[event][0]["command"]
        payload = json.dumps({"hook_event_name": event, "conversation_id": "c1",
                              "generation_id": "g1", "workspace_roots": ["/workspace"],
                              "status": "completed", "loop_count": 0})  # fmt: skip
        _, out = self.sh(f"printf '%s' {shlex.quote(payload)} | {command}")
        answer = json.loads(out.strip().splitlines()[-1])
        assert isinstance(answer, dict)
        return answer


def unit_keys(text: str) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            keys.setdefault(f"{section}.{key}", []).append(value)
    return keys


@pytest.fixture
def vm(vm_image: str, docker_client: docker.DockerClient, docker_tracker: DockerTracker) -> Vm:
    container = docker_client.containers.run(
        vm_image, ["sleep", "infinity"], detach=True, network_mode="none",
        labels=docker_tracker.labels, name=f"cloudrunner-deb-{uuid.uuid4().hex[:10]}",
    )  # fmt: skip
    docker_tracker.track(container)
    return Vm(container)


def test_the_agent_vm_quick_start_runs_as_written_on_a_clean_bookworm(
    vm: Vm, release: Path
) -> None:
    (deb,) = release.glob(f"cloudrunner_*_{ARCH}.deb")
    vm.put(RELEASE, [release / "SHA256SUMS", deb])
    blocks = blocks_named("vm")
    assert [b.page for b in blocks] == ["docs/quickstart/agent-vm.md"] * len(blocks)
    assert len(blocks) >= 4
    started = checked = False
    for block in blocks:
        text = block.text.strip()
        if "systemctl" in text:
            # systemd is not PID 1 in a container: verify the unit, then start its ExecStart
            assert text == START_BLOCK, f"{block.page}:{block.line}: {text}"
            for unit in ("/etc/systemd/system/cloudrunner.service",
                         "/lib/systemd/system/cloudrunner.service"):  # fmt: skip
                code, out = vm.sh(f"systemd-analyze verify --man=no {unit}", ok=False)
                assert code == 0 and out.strip() == "", f"{unit}:\n{out}"
            vm.start_unit()
            started = True
        elif text.startswith("cloudrunner vm --check"):
            # no engine runs in the container: the one missing piece, said in one line
            code, out = vm.sh(text, ok=False)
            missing = [x for x in out.splitlines() if x.startswith("missing: ")]
            assert code == 1 and len(missing) == 1, out
            assert missing[0].startswith("missing: the Docker engine: ") and "docker.io" in out
            assert "/etc/cursor/hooks.json: routes the 14 cloud events" in out
            assert "Traceback" not in out
            checked = True
        else:
            vm.sh(text)
    assert started and checked

    # what the package and `cloudrunner vm` put there
    assert vm.sh("cloudrunner --version")[1].startswith(f"cloudrunner {project_version()}")
    agent = json.loads(vm.read("/etc/cursor/hooks.json"))["hooks"]
    assert len(agent) == 14
    for event, (entry,) in agent.items():
        assert shlex.split(entry["command"])[:3] == ["/usr/bin/cloudrunner-hook", "hook", event]
    keys = unit_keys(vm.read("/etc/systemd/system/cloudrunner.service"))
    assert shlex.split(keys["Service.ExecStart"][0])[:2] == ["/usr/bin/cloudrunner", "serve"]
    assert "--workspace" in keys["Service.ExecStart"][0]
    assert "/workspace" in keys["Service.ExecStart"][0]
    # installed, not enabled: nothing links the unit into a target (the package never does)
    vm.sh("test ! -e /etc/systemd/system/multi-user.target.wants/cloudrunner.service")
    settings = tomllib.loads(vm.sh("cloudrunner config show")[1])
    assert settings["sources"]["enterprise_hooks"] == "/etc/cloudrunner/enterprise-hooks.json"
    assert vm.read("/var/lib/dpkg/info/cloudrunner.conffiles").split() == [
        "/etc/cloudrunner/config.toml", "/etc/cloudrunner/enterprise-hooks.json"]  # fmt: skip

    # the daemon answers an event (no hook is loaded: no container is needed) and records it
    assert vm.send("stop") == {}
    vm.sh("cloudrunner audit verify /var/lib/cloudrunner/audit.log")
    # nothing of it is written under /opt at run time: only what the package lists is there
    vm.stop_daemon()
    vm.sh("test -z \"$(find /opt/cloudrunner -type f -newer /var/lib/dpkg/info/cloudrunner.list "
          "! -path '*/__pycache__*' -print -quit)\"")  # fmt: skip


def test_an_upgrade_keeps_the_settings_and_the_audit_chain_and_purge_keeps_the_state(
    vm: Vm, release: Path, newer_release: Future[Path]
) -> None:
    (deb_n,) = release.glob(f"cloudrunner_*_{ARCH}.deb")
    vm.put(RELEASE, [deb_n])
    vm.sh(f"apt-get install -y ./{deb_n.name}")
    # the operator's edit: a top-level key, after state_dir (before the first table)
    vm.sh(r"sed -i 's|^state_dir = .*|&\nhook_timeout = 45.0|' /etc/cloudrunner/config.toml")
    edited = vm.read("/etc/cloudrunner/config.toml")
    vm.sh("cloudrunner vm --workspace /workspace")
    vm.start_unit()
    assert vm.send("stop") == {}
    vm.stop_daemon()
    before = vm.sh("cloudrunner audit verify /var/lib/cloudrunner/audit.log")[1]

    (deb_n1,) = newer_release.result().glob(f"*_{ARCH}.deb")
    vm.put(RELEASE, [deb_n1])
    vm.sh(f"apt-get install -y ./{deb_n1.name}")
    assert vm.sh("dpkg-query -W -f '${Version}' cloudrunner")[1] == f"{project_version()}+upgrade1"
    assert vm.read("/etc/cloudrunner/config.toml") == edited
    assert "hook_timeout = 45.0" in vm.sh("cloudrunner config show")[1]
    assert vm.sh("cloudrunner audit verify /var/lib/cloudrunner/audit.log")[1] == before
    vm.start_unit()  # the new version carries on with the same chain
    assert vm.send("stop") == {}
    vm.stop_daemon()
    after = vm.sh("cloudrunner audit verify /var/lib/cloudrunner/audit.log")[1]
    assert after != before and "OK" in after

    vm.sh("apt-get remove -y cloudrunner && test -f /etc/cloudrunner/config.toml")
    vm.sh("apt-get purge -y cloudrunner && test ! -e /etc/cloudrunner/config.toml")
    vm.sh("test ! -e /usr/bin/cloudrunner && test ! -e /opt/cloudrunner")
    vm.sh("test -s /var/lib/cloudrunner/audit.log")  # state and audit log stay
