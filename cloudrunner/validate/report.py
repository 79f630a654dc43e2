"""`cloudrunner validate [PATH ...]`: lint hooks files and say what would run in the cloud.

A PATH is a repository (its `.cursor/hooks.json`), a `.cursor` or managed-hooks directory
(its `hooks.json`) or a hooks file. For each file: the errors and warnings with
file:line:column where there is one, and a verdict per hook under the profile (runs /
skipped and why / never runs). Exit 1 when any file has an error (with `--strict`, also a
warning), else 0; a PATH that does not exist is a usage error (exit 2).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from cloudrunner import shell as shell_syntax
from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.claude_config import parse_claude_settings
from cloudrunner.protocol.claude_mapping import ClaudeOrigin
from cloudrunner.protocol.config import HookEntry, parse_hooks_file
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import Diagnostic, Severity, error, info, warning
from cloudrunner.protocol.events import EVENTS
from cloudrunner.protocol.jsonpos import PositionIndex
from cloudrunner.protocol.profiles import Profile, SourceKind
from cloudrunner.settings import Settings
from cloudrunner.sources import HOOKS_FILE_NAME, HooksFileRefused, read_hooks_bytes, skip_reason
from cloudrunner.validate import checks as validate_checks
from cloudrunner.validate import policy as validate_policy
from cloudrunner.validate.image_programs import ImagePrograms
from cloudrunner.workspace import resolves_inside


@dataclass(frozen=True)
class Target:
    file: Path
    #: the directory the file must stay inside (a repository root, or the file's directory)
    root: Path
    #: set when the file is a repository's `.cursor/hooks.json`: script paths are checked
    repository: Path | None
    #: set when the file is a Claude Code settings file (read in Claude's form)
    claude: ClaudeOrigin | None = None


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
    #: about the run as a whole (for example: the image check was skipped, and why)
    notes: tuple[Diagnostic, ...] = ()

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
            "notes": [n.to_dict() for n in self.notes],
        }


def _claude_targets(repository: Path) -> list[Target]:
    """A repository's Claude Code settings files that exist, highest priority first."""
    out = []
    for origin in (ClaudeOrigin.PROJECT_LOCAL, ClaudeOrigin.PROJECT):
        file = repository / origin.relative
        if file.exists() or file.is_symlink():
            out.append(Target(file, repository, repository, origin))
    return out


def resolve_targets(path: Path) -> list[Target]:
    """`resolve_target`, and for a repository its Claude Code settings files too."""
    if path.is_dir():
        claude = _claude_targets(path)
        nested = path / ".cursor" / HOOKS_FILE_NAME
        if claude and not (nested.exists() or nested.is_symlink()):
            return claude
        return [resolve_target(path), *claude]
    return [resolve_target(path)]


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
    if parent.name == ".claude" and file.name in ("settings.json", "settings.local.json"):
        origin = (
            ClaudeOrigin.PROJECT_LOCAL
            if file.name == "settings.local.json"
            else ClaudeOrigin.PROJECT
        )
        return Target(file, parent.parent, parent.parent, origin)
    if parent.name == ".cursor" and file.name == HOOKS_FILE_NAME:
        return Target(file, parent.parent, parent.parent)
    return Target(file, parent, None)


def _verdict(
    kind: SourceKind, entry: HookEntry, profile: Profile, *, claude_off: bool = False
) -> HookVerdict:
    d = entry.definition
    spec = EVENTS[entry.event]
    command = d.command if d.type == "command" else None
    where = "in cloud agents" if profile is Profile.CLOUD else "in the desktop profile"
    if entry.claude is not None:
        where += f" (Claude Code {entry.claude.event}, on {entry.event})"
    reason = skip_reason(kind, entry, profile)
    if claude_off:
        reason = "sources.claude_code is off, so Claude Code hooks do not load"
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
    # the words as the shell reads them (the parser the pinned digest uses); not the
    # redirections, whose files a command may create
    parsed = shell_syntax.parse(command)
    for word in dict.fromkeys(w for c in parsed.commands for w in c.words):
        if not _RELATIVE_SCRIPT.match(word) or "://" in word:
            continue
        if (repository / word).exists():
            if not resolves_inside(repository / word, repository):
                out.append(
                    warning(
                        DiagnosticCode.SCRIPT_OUTSIDE,
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
                DiagnosticCode.SCRIPT_NOT_FOUND,
                f"{word} does not exist in the repository {repository}{hint}",
                file=file,
                pointer=f"{entry.pointer}/command",
            )
        )
    return out


def _matcher_warnings(entry: HookEntry, file: str) -> list[Diagnostic]:
    """A matcher that compiles but may not do what its author meant: a shape that can
    backtrack catastrophically (its search may run out of time: match_timeout), or an
    escape JavaScript reads differently from Python."""
    translation = entry.matcher.translation
    if translation is None:
        return []
    shown = entry.definition.matcher
    pointer = f"{entry.pointer}/matcher"
    spec = EVENTS[entry.event]
    blocks = entry.definition.fail_closed and spec.can_block
    consequence = "the hook does not run" + (
        ", and blocks since it is failClosed" if blocks else ""
    )
    out = [
        warning(
            DiagnosticCode.MATCHER_BACKTRACKING,
            f"matcher {shown!r}: {shape}, the shape of catastrophic backtracking; on some "
            f"inputs its search runs out of time (matcher_timeout_ms) and {consequence} "
            "(outcome match_timeout); rewrite it without the nested repetition",
            file=file,
            pointer=pointer,
        )
        for shape in translation.backtracking
    ]
    out.extend(
        warning(
            DiagnosticCode.MATCHER_NOT_JAVASCRIPT,
            f"matcher {shown!r}: {note} (matchers are JavaScript regular expressions)",
            file=file,
            pointer=pointer,
        )
        for note in translation.notes
    )
    return out


def validate_file(
    target: Target,
    profile: Profile,
    kind: SourceKind,
    programs: ImagePrograms | None = None,
    settings: Settings | None = None,
) -> FileReport:
    settings = settings or Settings()
    file = str(target.file)
    try:
        data = read_hooks_bytes(target.file, target.root)
    except FileNotFoundError:
        return FileReport(
            target.file,
            (error(DiagnosticCode.SOURCE_ABSENT, "the file does not exist", file=file),),
            (),
        )
    except HooksFileRefused as exc:
        return FileReport(target.file, (error(exc.code, exc.message, file=file),), ())
    claude_off = target.claude is not None and not settings.sources.claude_code
    parsed = (
        parse_hooks_file(data, file=file)
        if target.claude is None
        else parse_claude_settings(data, file=file)
    )
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
                verdicts.append(_verdict(kind, entry, profile, claude_off=claude_off))
                if entry.claude is None:
                    scripts.extend(_matcher_warnings(entry, file))
                scripts.extend(validate_policy.hook_diagnostics(entry, kind, settings, file))
                if target.repository is not None and kind is SourceKind.PROJECT:
                    scripts.extend(_script_warnings(entry, target.repository, file))
                if verdicts[-1].verdict == "runs":
                    scripts.extend(_sandbox_warnings(entry, target, kind, programs, file))
    if target.claude is None:
        diagnostics = [_unknown_event_note(d) for d in diagnostics]
    if programs is not None and kind is SourceKind.PROJECT and _has_environment(target):
        diagnostics.append(
            info(
                DiagnosticCode.IMAGE_CHECK_SKIPPED,
                f"project hooks run in the image .cursor/environment.json builds, so their "
                f"programs were not checked against {programs.image}",
                file=file,
            )
        )
    if scripts:
        index = PositionIndex(data.decode("utf-8-sig"))
        for note in scripts:
            at = index.find(note.pointer or "")
            diagnostics.append(note.located(*at) if at else note)
    policy = validate_policy.source_diagnostics(kind, settings, file, target.repository, data)
    diagnostics += policy
    refusal = next((d for d in policy if d.code in _FILE_REFUSED), None)
    if refusal is not None:  # the file does not load: none of its hooks runs
        why = f"does not load: {_FILE_REFUSED[refusal.code]}"
        verdicts = [
            dataclasses.replace(v, verdict="skipped", reason=why) if v.verdict == "runs" else v
            for v in verdicts
        ]
    return FileReport(target.file, tuple(diagnostics), tuple(verdicts))


#: the policy errors that keep a whole hooks file from loading, and the verdict's words
_FILE_REFUSED: dict[str, str] = {
    DiagnosticCode.SOURCE_NOT_ALLOWED: "its source is not in sources.allowed",
    DiagnosticCode.PROJECT_NOT_APPROVED: "the project hooks digest is not approved",
    DiagnosticCode.PROJECT_DIGEST_FAILED: "the project hooks digest cannot be computed",
    DiagnosticCode.PROJECT_DIGEST_UNCOVERED: (
        "a hook may run repository files the pinned digest does not cover"
    ),
}


def _unknown_event_note(d: Diagnostic) -> Diagnostic:
    if d.code != DiagnosticCode.UNKNOWN_EVENT or validate_checks.UNKNOWN_EVENT_NOTE in d.message:
        return d
    return dataclasses.replace(d, message=d.message + validate_checks.UNKNOWN_EVENT_NOTE)


def _hook_base(target: Target, kind: SourceKind) -> Path | None:
    """The directory a hook's relative script paths resolve against, when known."""
    if kind is SourceKind.PROJECT:
        return target.repository
    return target.file.parent


def _sandbox_warnings(
    entry: HookEntry, target: Target, kind: SourceKind, programs: ImagePrograms | None,
    file: str,
) -> list[Diagnostic]:  # fmt: skip
    """What would fail in the sandbox before any event: an unmatched matcher, a script that
    cannot run as written, a program the image does not have."""
    out: list[Diagnostic] = []
    # a Claude matcher is searched in Claude's tool names, which the Cursor check does not know
    problem = (
        validate_checks.matcher_problem(entry.event, entry.matcher) if not entry.claude else ""
    )
    if problem:
        out.append(warning(DiagnosticCode.MATCHER_NEVER_MATCHES, problem, file=file,
                           pointer=f"{entry.pointer}/matcher"))  # fmt: skip
    command = entry.definition.command
    if entry.definition.type != "command" or not command:
        return out
    pointer = f"{entry.pointer}/command"
    used, scripts = validate_checks.programs_of(command, _hook_base(target, kind))
    for script in scripts:
        found = validate_checks.script_problem(script)
        if found:
            out.append(warning(found[0], found[1], file=file, pointer=pointer))
    if programs is None or (kind is SourceKind.PROJECT and _has_environment(target)):
        return out
    seen: set[str] = set()
    for use in used:
        if use.name in seen:
            continue
        seen.add(use.name)
        if validate_checks.program_known(use.name, programs.programs, programs.path_dirs) is False:
            via = "" if use.via == "command" else f" ({use.via})"
            out.append(
                warning(
                    DiagnosticCode.PROGRAM_NOT_IN_IMAGE,
                    f"`{use.name}`{via} is not in image {programs.image}, so this hook would "
                    "fail with exit 127: add it through .cursor/environment.json or the "
                    "runtime image (sandbox.image)",
                    file=file,
                    pointer=pointer,
                )
            )
    return out


def _has_environment(target: Target) -> bool:
    """Project hooks of a repository with .cursor/environment.json run in the image it builds."""
    return (
        target.repository is not None
        and (target.repository / ".cursor" / "environment.json").is_file()
    )


def validate_paths(
    paths: Sequence[Path],
    *,
    profile: Profile = Profile.CLOUD,
    source: SourceKind = SourceKind.PROJECT,
    programs: ImagePrograms | None = None,
    notes: Sequence[Diagnostic] = (),
    settings: Settings | None = None,
) -> ValidationReport:
    """Validate each PATH against the worker settings' policy (default settings when None).
    Raises `CloudrunnerError` for a PATH that does not exist.

    `programs`: the PATH programs of the image the hooks run in; None skips that check.
    """
    targets = [t for p in paths for t in resolve_targets(p)]
    files = tuple(validate_file(t, profile, source, programs, settings) for t in targets)
    return ValidationReport(profile, source, files, tuple(notes))


def image_programs_for(
    image: str, state_dir: Path
) -> tuple[ImagePrograms | None, list[Diagnostic]]:
    """The image's PATH programs, or None with a note saying why the check is skipped."""
    from cloudrunner.docker_engine import connect
    from cloudrunner.validate import image_programs

    try:
        client = connect(timeout=10)
    except CloudrunnerError as exc:
        return None, [
            info(
                DiagnosticCode.IMAGE_CHECK_SKIPPED,
                f"programs were not checked against image {image}: {exc.message}",
            )
        ]
    try:
        listing = image_programs.list_programs(
            client, image, state_dir / image_programs.CACHE_DIR_NAME
        )
    except CloudrunnerError as exc:
        return None, [
            info(
                DiagnosticCode.IMAGE_CHECK_SKIPPED,
                f"programs were not checked against image {image}: {exc.message}",
            )
        ]
    finally:
        client.close()
    where = "cached listing" if listing.cached else "listed now"
    return listing, [
        info(
            DiagnosticCode.IMAGE_CHECKED,
            f"programs checked against image {image} "
            f"({listing.image_id[:19]}, {len(listing.programs)} programs, {where})",
        )
    ]


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
    for note in report.notes:
        print(note.render(), file=out)
    totals = f"{report.errors} error(s), {report.warnings} warning(s)"
    print(f"{len(report.files)} file(s) checked: {totals}", file=out)
