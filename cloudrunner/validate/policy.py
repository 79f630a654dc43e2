"""What `validate` says about the operator's policy, before any event: sources the settings
do not allow, pinned project hooks whose digest is not approved (with the digest to
approve), and commands that evidently need the network where their source has none."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cloudrunner.egress import domain_pattern
from cloudrunner.protocol.config import HookEntry
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode
from cloudrunner.protocol.diagnostics import Diagnostic, error, info, warning
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.settings import Settings
from cloudrunner.sources import DigestError, compute


@dataclass(frozen=True)
class NetworkUse:
    pattern: re.Pattern[str]
    what: str
    #: the hosts it reaches ("{1}": the one the command names)
    hosts: tuple[str, ...]


_NPM = ("registry.npmjs.org",)
_PYPI = ("pypi.org", "files.pythonhosted.org")

#: commands that reach the network by their nature; each says what it fetches, and where
NETWORK_USES = (
    NetworkUse(re.compile(r"(?<![\w.-])(npx|bunx|pnpx)(?![\w.-])"), "{0} fetches packages", _NPM),
    NetworkUse(re.compile(r"(?<![\w.-])(uvx)(?![\w.-])"), "{0} fetches packages", _PYPI),
    NetworkUse(re.compile(r"(?<![\w.-])(pnpm|yarn|bun)\s+dlx\b"), "{0} dlx fetches packages", _NPM),
    NetworkUse(re.compile(r"(?<![\w.-])npm\s+(?:exec|install|i|ci|update)\b"),
               "npm fetches packages", _NPM),
    NetworkUse(re.compile(r"(?<![\w.-])pip3?\s+install\b"), "pip install fetches packages", _PYPI),
    NetworkUse(re.compile(r"(?<![\w.-])uv\s+(?:pip\s+install|tool\s+install|add|sync|run\s+--with)\b"),
               "uv fetches packages", _PYPI),
    NetworkUse(re.compile(r"(?<![\w.-])(curl|wget)\b[^|;&]*?\bhttps?://(?!localhost\b|127\.)([\w.-]+)"),
               "{0} calls {1}", ("{1}",)),
    NetworkUse(re.compile(r"(?<![\w.-])git\s+(?:clone|fetch|pull|push|ls-remote)\b"),
               "git talks to a remote", ()),
)  # fmt: skip


def network_uses(command: str) -> list[tuple[str, tuple[str, ...]]]:
    """(why, hosts) for each way a command evidently needs the network."""
    found = []
    for use in NETWORK_USES:
        match = use.pattern.search(command)
        if match:
            groups = match.groups()
            hosts = tuple(h.format(*groups).lower() for h in use.hosts)
            found.append((use.what.format(*groups), hosts))
    return found


def network_needs(command: str) -> list[str]:
    """Why a command evidently needs the network (empty when nothing says so)."""
    return [why for why, _ in network_uses(command)]


def _allowed(host: str, domains: tuple[str, ...]) -> bool:
    return any(re.search(domain_pattern(d), host, re.I) for d in domains)


def hook_diagnostics(
    entry: HookEntry, kind: SourceKind, settings: Settings, file: str
) -> list[Diagnostic]:
    command = entry.definition.command
    if entry.definition.type != "command" or not command:
        return []
    rules = settings.egress.rules_for(kind)
    named = settings.sandbox.profile_for(kind).network
    if rules.policy == "open" or (named != "none" and rules.policy == "none"):
        return []  # a whole network: nothing to say
    problems = []
    for why, hosts in network_uses(command):
        if rules.policy == "none":
            problems.append(
                f"{why}, but {kind} hooks have no network (egress.{kind}.policy is none): this "
                f"hook will fail in cloudrunner unless the operator allows what it needs "
                f"(egress.{kind}.policy = allowlist with "
                f"{', '.join(hosts) or 'the hosts it uses'} in egress.{kind}.domains)"
            )
        else:
            missing = [h for h in hosts if not _allowed(h, rules.domains)]
            if missing:
                problems.append(
                    f"{why}, but egress.{kind}.domains does not allow {', '.join(missing)}: "
                    "the proxy will refuse it"
                )
    return [
        warning(
            DiagnosticCode.NEEDS_NETWORK, problem, file=file, pointer=f"{entry.pointer}/command"
        )
        for problem in problems
    ]


def source_diagnostics(
    kind: SourceKind, settings: Settings, file: str, repository: Path | None, data: bytes
) -> list[Diagnostic]:
    """Diagnostics about a whole file: its source not allowed; its digest (project)."""
    out: list[Diagnostic] = []
    if kind not in settings.sources.allowed:
        allowed = ", ".join(settings.sources.allowed) or "none"
        out.append(
            error(
                DiagnosticCode.SOURCE_NOT_ALLOWED,
                f"{kind} hooks do not load: the worker settings allow only these sources "
                f"(sources.allowed): {allowed}",
                file=file,
            )
        )
    approved = settings.sources.project_digests
    if kind is not SourceKind.PROJECT or repository is None or approved is None:
        return out  # not pinned: the digest is `cloudrunner hooks digest`'s to print
    try:
        computed = compute(repository, data, extra_paths=settings.sources.project_digest_paths)
        digest = computed.digest
    except DigestError as exc:
        return [*out, error(DiagnosticCode.PROJECT_DIGEST_FAILED, exc.message, file=file)]
    if computed.unseen:
        out.append(
            warning(
                DiagnosticCode.PROJECT_DIGEST_UNSEEN,
                "the pinned digest cannot see part of these commands (each needs every file "
                "it may run covered by the digest; review it by hand, or move it into a "
                "script under .cursor/hooks/): " + "; ".join(computed.unseen),
                file=file,
            )
        )
    for hook in computed.uncovered:
        out.append(
            error(
                DiagnosticCode.PROJECT_DIGEST_UNCOVERED,
                hook.describe() + "; until then these hooks do not load, approved or not",
                file=file,
                pointer=f"{hook.pointer}/command",
            )
        )
    # hooks left uncovered are not approvable: whether the digest is listed does not matter
    if computed.uncovered:
        return out
    if digest in approved:
        out.append(
            info(
                DiagnosticCode.PROJECT_APPROVED,
                f"project hooks digest {digest} is approved",
                file=file,
            )
        )
    else:
        out.append(
            error(
                DiagnosticCode.PROJECT_NOT_APPROVED,
                f"project hooks digest {digest} is not in sources.project_digests: these "
                "hooks will not load; review the file and the scripts it runs, then add the "
                "digest to approve them",
                file=file,
            )
        )
    return out
