"""`cloudrunner validate [PATH ...]`: lint hooks files and say what would run in the cloud.

A PATH is a repository (its `.cursor/hooks.json`), a `.cursor` or managed-hooks directory
(its `hooks.json`) or a hooks file. For each file: the errors and warnings with
file:line:column where there is one, and a verdict per hook under the profile (runs /
skipped and why / never runs). Exit 1 when any file has an error (with `--strict`, also a
warning), else 0; a PATH that does not exist is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from cloudrunner.errors import CloudrunnerError, ExitCode
from cloudrunner.protocol.config import HookEntry, parse_hooks_file
from cloudrunner.protocol.diagnostics import Diagnostic, Severity, error, warning
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.jsonpos import PositionIndex
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.repo_files import resolves_inside
from cloudrunner.sources import HOOKS_FILE_NAME, HooksFileRefused, read_hooks_bytes, skip_reason


@dataclass(frozen=True)
class Target:
    file: Path
    #: the directory the file must stay inside (a repository root, or the file's directory)
    root: Path
    #: set when the file is a repository's `.cursor/hooks.json`: script paths are checked
    repository: Path | None


@dataclass(frozen=True)
class HookVerdict:
    event: str
    index: int
    pointer: str
    type: str
    command: str | None
    #: "runs", "skipped" or "never-runs"
    verdict: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class FileReport:
    path: Path
    diagnostics: tuple[Diagnostic, ...]
    hooks: tuple[HookVerdict, ...]
    sha256: str | None = None

    def count(self, severity: Severity) -> int:
        return sum(1 for d in self.diagnostics if d.severity is severity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "errors": self.count(Severity.ERROR),
            "warnings": self.count(Severity.WARNING),
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "hooks": [h.to_dict() for h in self.hooks],
        }


@dataclass(frozen=True)
class ValidationReport:
    profile: Profile
    source: SourceKind
    files: tuple[FileReport, ...]

    @property
    def errors(self) -> int:
        return sum(f.count(Severity.ERROR) for f in self.files)

    @property
    def warnings(self) -> int:
        return sum(f.count(Severity.WARNING) for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": str(self.profile),
            "source": str(self.source),
            "errors": self.errors,
            "warnings": self.warnings,
            "files": [f.to_dict() for f in self.files],
        }


def resolve_target(path: Path) -> Target:
    if path.is_dir():
        nested = path / ".cursor" / HOOKS_FILE_NAME
        if nested.exists() or nested.is_symlink():
            return Target(nested, path, path)
        direct = path / HOOKS_FILE_NAME
        if direct.exists() or direct.is_symlink():
            return _file_target(direct)
        raise CloudrunnerError(
            f"no hooks file in {path}: expected {nested} (a repository) or {direct} "
            "(a .cursor or managed hooks directory)"
        )
    if path.exists() or path.is_symlink():
        return _file_target(path)
    raise CloudrunnerError(f"{path} does not exist; give a repository, a directory or a hooks file")


def _file_target(file: Path) -> Target:
    parent = file.parent
    if parent.name == ".cursor" and file.name == HOOKS_FILE_NAME:
        return Target(file, parent.parent, parent.parent)
    return Target(file, parent, None)


def _verdict(kind: SourceKind, entry: HookEntry, profile: Profile) -> HookVerdict:
    d = entry.definition
    spec = EVENTS[entry.event]
    command = d.command if d.type == "command" else None
    where = "in cloud agents" if profile is Profile.CLOUD else "in the desktop profile"
    reason = skip_reason(kind, entry, profile)
    if reason is not None:
        verdict = "skipped"
    elif not entry.matcher.valid:
        verdict = "never-runs"
        reason = f"invalid matcher {d.matcher!r}"
        if d.fail_closed and spec.can_block:
            reason += f"; failClosed, so it blocks every {entry.event} event"
    else:
        verdict, reason = "runs", f"runs {where}"
    return HookVerdict(entry.event, entry.index, entry.pointer, d.type, command, verdict, reason)


#: a command word that names a script inside the repository (not $VAR, ~, flags or URLs)
_RELATIVE_SCRIPT = re.compile(r"^(?:\./)?[\w.-]+(?:/[\w.-]+)+$")


def _script_warnings(entry: HookEntry, repository: Path, file: str) -> list[Diagnostic]:
    command = entry.definition.command
    if entry.definition.type != "command" or not command:
        return []
    out = []
    for word in command.split():
        if not _RELATIVE_SCRIPT.match(word) or "://" in word:
            continue
        if (repository / word).exists():
            if not resolves_inside(repository / word, repository):
                out.append(
                    warning(
                        "script-outside",
                        f"{word} is a symlink that leads outside the repository {repository}; "
                        "only the repository is mounted in the sandbox, so the hook will not "
                        "find it there (replace the symlink with the file itself)",
                        file=file,
                        pointer=f"{entry.pointer}/command",
                    )
                )
            continue
        hint = ""
        if (repository / ".cursor" / word).exists():
            fixed = ".cursor/" + word.removeprefix("./")
            hint = f"; project hook paths are relative to the repository root: use {fixed}"
        out.append(
            warning(
                "script-not-found",
                f"{word} does not exist in the repository {repository}{hint}",
                file=file,
                pointer=f"{entry.pointer}/command",
            )
        )
    return out


def validate_file(target: Target, profile: Profile, kind: SourceKind) -> FileReport:
    file = str(target.file)
    try:
        data = read_hooks_bytes(target.file, target.root)
    except FileNotFoundError:
        return FileReport(
            target.file, (error("source-absent", "the file does not exist", file=file),), ()
        )
    except HooksFileRefused as exc:
        return FileReport(target.file, (error(exc.code, exc.message, file=file),), ())
    parsed = parse_hooks_file(data, file=file)
    diagnostics = list(parsed.diagnostics)
    verdicts: list[HookVerdict] = []
    scripts: list[Diagnostic] = []
    if parsed.config is not None:
        for entries in parsed.config.hooks.values():
            first_of: dict[str, HookEntry] = {}
            for entry in entries:
                original = first_of.setdefault(entry.canonical, entry)
                if original is not entry:
                    d = entry.definition
                    reason = f"identical to {entry.event}[{original.index}]: runs once"
                    verdicts.append(
                        HookVerdict(
                            entry.event,
                            entry.index,
                            entry.pointer,
                            d.type,
                            d.command,
                            "skipped",
                            reason,
                        )
                    )
                    continue
                verdicts.append(_verdict(kind, entry, profile))
                if target.repository is not None and kind is SourceKind.PROJECT:
                    scripts.extend(_script_warnings(entry, target.repository, file))
    if scripts:
        index = PositionIndex(data.decode("utf-8-sig"))
        for note in scripts:
            at = index.find(note.pointer or "")
            diagnostics.append(note.located(*at) if at else note)
    return FileReport(target.file, tuple(diagnostics), tuple(verdicts))


def validate_paths(
    paths: Sequence[Path],
    *,
    profile: Profile = Profile.CLOUD,
    source: SourceKind = SourceKind.PROJECT,
) -> ValidationReport:
    """Validate each PATH. Raises `CloudrunnerError` for a PATH that does not exist."""
    targets = [resolve_target(p) for p in paths]
    return ValidationReport(
        profile, source, tuple(validate_file(t, profile, source) for t in targets)
    )


def render_text(report: ValidationReport, out: TextIO) -> None:
    for f in report.files:
        for d in f.diagnostics:
            print(d.render(), file=out)
        if f.hooks:
            runs = sum(1 for h in f.hooks if h.verdict == "runs")
            counts = f"{len(f.hooks)} hook(s), {runs} run(s) under the {report.profile} profile"
            print(f"{f.path}: {counts}", file=out)
            for h in f.hooks:
                shown = f"`{h.command}`" if h.command is not None else "(prompt)"
                print(f"  {h.verdict:<10} {h.event}[{h.index}] {shown}: {h.reason}", file=out)
        elif f.count(Severity.ERROR) == 0:
            print(f"{f.path}: no hooks", file=out)
    totals = f"{report.errors} error(s), {report.warnings} warning(s)"
    print(f"{len(report.files)} file(s) checked: {totals}", file=out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="*", type=Path, default=[Path(".")], metavar="PATH",
        help="a repository, a .cursor (or managed hooks) directory, or a hooks file (default: .)",
    )  # fmt: skip
    p.add_argument(
        "--profile", choices=[str(x) for x in Profile], default=str(Profile.CLOUD),
        help="what would load: cloud (default) or desktop",
    )  # fmt: skip
    p.add_argument(
        "--source", choices=[str(x) for x in SourceKind], default=str(SourceKind.PROJECT),
        help="which source the files are (default: project)",
    )  # fmt: skip
    p.add_argument("--format", choices=["text", "json"], default="text", help="output format")
    p.add_argument("--strict", action="store_true", help="exit 1 on warnings as well as errors")


def validate_command(args: argparse.Namespace) -> int:
    report = validate_paths(
        args.paths, profile=Profile(args.profile), source=SourceKind(args.source)
    )
    if args.format == "json":
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render_text(report, sys.stdout)
    failed = report.errors > 0 or (args.strict and report.warnings > 0)
    return ExitCode.FINDINGS if failed else ExitCode.OK
