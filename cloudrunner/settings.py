"""Worker settings: defaults, a TOML file, `CLOUDRUNNER_*` environment variables, flags.

Later layers override earlier ones key by key. The file is read with tomllib and written
(`cloudrunner config init`, `config show`) with tomli-w. Every key is checked: a misspelt
key or a wrong type is an error naming the file (or variable) and the key, never ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import tomli_w
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from cloudrunner.egress import EgressSettings
from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.profiles import (
    MANAGED_SOURCES,
    UNMANAGED_SOURCES,
    Profile,
    SourceKind,
    SourceKindName,
)
from cloudrunner.sandbox.limits import MIB, ByteSize, SandboxProfile
from cloudrunner.telemetry import TelemetrySettings

if TYPE_CHECKING:
    from cloudrunner.sources import SourceSettings

DEFAULT_CONFIG_PATHS = (Path("/etc/cloudrunner/config.toml"),)
DEFAULT_STATE_DIR = Path("/var/lib/cloudrunner")


class SettingsError(CloudrunnerError):
    pass


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True
    )


def _digest(value: str) -> str:
    from cloudrunner.sources import normalise

    return normalise(value)


def _digest_glob(value: str) -> str:
    from cloudrunner.sources import check_glob

    return check_glob(value)


class SourcesSettings(_Section):
    enterprise_hooks: Path = Path("/etc/cloudrunner/enterprise-hooks.json")
    """the managed enterprise hooks file (the fleet's hooks, never the agent's own
    /etc/cursor/hooks.json, whose hooks call the daemon); a missing file means no enterprise
    hooks"""
    team_hooks: Path | None = None
    """the operator-given team hooks file or directory; empty means none"""
    user_home: Path | None = None
    """home directory whose ~/.cursor/hooks.json the desktop profile loads; empty means $HOME"""
    trust_project_hooks: bool = True
    """project hooks run only in a trusted workspace (default: a cloud agent trusts its repo)"""
    allowed: list[SourceKind] = Field(default_factory=lambda: list(SourceKind))
    """the sources that may load; managed-only mode: ["enterprise", "team"] (the others are
    skipped, and each skip is recorded with this reason)"""
    claude_code: bool = False
    """also load Claude Code hooks (Cursor's "Third Party Hooks"): the workspace's
    .claude/settings.local.json and .claude/settings.json below the project source, and
    ~/.claude/settings.json as a user source; project sources for trust, managed-only mode and
    pinning"""
    project_digests: list[Annotated[str, AfterValidator(_digest)]] | None = None
    """pinned project hooks: the approved digests of a repository's hooks (`cloudrunner hooks
    digest DIR` prints one); project hooks whose digest is not listed do not load; unset:
    not pinned (an empty list approves nothing)"""
    project_digest_paths: list[Annotated[str, AfterValidator(_digest_glob)]] = Field(
        default_factory=list
    )
    """more repository files the pinned digest covers, as globs relative to the repository
    (`*` within a directory, `**` across; a directory: its whole tree), for hooks that load
    files their commands do not name; every file under .cursor/hooks/ is always covered"""


class WorkspaceSettings(_Section):
    repo: str = ""
    """repository URL or path to clone (https, ssh, file://, local path); empty: no clone"""
    ref: str = ""
    """branch, tag or commit to check out; empty: the remote's default branch"""
    path: Path | None = None
    """adopt this checkout in place instead of cloning"""
    clone_dir: Path | None = None
    """where clones go; empty: <state_dir>/workspaces"""
    shallow: bool = True
    """clone with depth 1 (a commit out of reach of a shallow clone is fetched by itself)"""
    credential_env: str = "CLOUDRUNNER_GIT_TOKEN"
    """name of the environment variable holding a token for https clones"""
    credential_file: Path | None = None
    """a file holding the token (read at clone time, never copied anywhere)"""
    credential_username: str = "x-access-token"
    """the user name sent with the token (GitHub: x-access-token; GitLab: oauth2)"""
    ssh_key_file: Path | None = None
    """a private key for ssh clones"""
    use_environment_json: bool = False
    """build the project hooks' image from the repository's .cursor/environment.json and
    run its install command once per image and commit before the first project hook"""
    install_timeout: float = Field(default=900.0, gt=0)
    """seconds the environment's install command may run"""


class HomeSettings(_Section):
    enabled: bool = True
    """give each source's hooks a writable HOME per workspace that persists across events,
    under <state_dir>/homes (daemon sessions: <state_dir>/daemon/homes/<session>); false:
    HOME is the image's home of the hook uid, read-only"""
    max_bytes: ByteSize = 512 * MIB
    """the most a HOME may hold; measured before each event's hooks of that source, and
    over it the source's hooks do not run (sandbox_error naming the directory)"""
    measure_interval_s: float = Field(default=10.0, ge=0)
    """a long-lived worker measures a HOME at most this often (a walk of a large cache costs
    milliseconds per event); 0: before every event"""
    remove_with_session: bool = True
    """remove a daemon session's homes when the session is closed (DELETE /v1/sessions/ID)"""
    git_user_name: str = Field(default="cloudrunner hook", min_length=1)
    """user.name in each HOME's .gitconfig (a repository's own user.name wins)"""
    git_user_email: str = Field(default="hook@cloudrunner.invalid", min_length=3)
    """user.email in each HOME's .gitconfig (a repository's own user.email wins)"""


class AuditSettings(_Section):
    path: Path | None = None
    """the audit log; empty: <state_dir>/audit.log"""
    fsync: Literal["always", "interval", "never"] = "always"
    """always: each event's records are on disk before the answer; interval: at most every
    fsync_interval seconds; never: left to the kernel (survives a process crash only)"""
    fsync_interval: float = Field(default=1.0, ge=0)
    """seconds between syncs when fsync is interval"""
    max_bytes: int = Field(default=64 * 1024 * 1024, ge=4096)
    """rotate when the current file would grow past this many bytes"""
    include_payload_text: bool = False
    """store prompt text, file contents and tool outputs instead of sha256 + length"""
    excerpt_bytes: int = Field(default=2048, ge=0, le=1024 * 1024)
    """how much of a hook's stdout/stderr an audit record keeps"""
    record_path: Path | None = None
    """also append every answered event (payload, answer, commit, hooks) to this replayable
    event stream for `cloudrunner replay`, secrets redacted as in the audit log; empty: none"""
    record_payload_text: bool = True
    """keep payload text (prompts, file contents, tool output) in the event stream so events
    replay as they came; false: sha256 and length as in the audit log (such events are
    refused when replayed)"""


class ServerSettings(_Section):
    socket: Path | None = None
    """the daemon's unix socket (owner-only); empty: <state_dir>/cloudrunner.sock"""
    listen: str = ""
    """also serve TCP on HOST:PORT (needs token_file); empty: unix socket only"""
    token_file: Path | None = None
    """file holding the bearer token TCP clients must send"""
    idle_timeout_s: float = Field(default=900.0, gt=0)
    """a warm session sandbox unused this long is closed"""
    max_warm: int = Field(default=64, ge=1, le=4096)
    """warm session sandboxes kept at most (the least recently used idle one goes first)"""
    max_concurrent_events: int = Field(default=64, ge=1, le=4096)
    """events handled at once; more wait in the queue (cloudrunner_queue_depth)"""
    drain_timeout_s: float = Field(default=30.0, ge=0)
    """on SIGTERM, how long in-flight events may take before their sandboxes are closed"""
    max_sessions: int = Field(default=1024, ge=1)
    """daemon sessions (POST /v1/sessions) open at once"""
    header_timeout_s: float = Field(default=10.0, gt=0)
    """a request's headers must have arrived this long after the connection opened (or the
    previous answer was sent); a slower client is disconnected"""
    body_timeout_s: float = Field(default=30.0, gt=0)
    """a request's body must have arrived this long after its headers"""
    keepalive_timeout_s: float = Field(default=5.0, gt=0)
    """an idle kept-alive connection is closed after this long"""
    keepalive_max_requests: int = Field(default=1000, ge=1)
    """requests on one connection at most; the answer to the last says Connection: close"""
    max_header_bytes: int = Field(default=65536, ge=1024, le=16 * 1024 * 1024)
    """request line and headers at most; more is refused with 431"""
    max_connections: int = Field(default=16384, ge=1)
    """open connections per listener; at the cap a new connection takes the place of the
    longest-idle one (no request in progress), or is closed when every one is busy"""
    max_unauthenticated: int = Field(default=1024, ge=1)
    """TCP connections that have not yet sent a request with the right bearer token, at most;
    at the cap the oldest of them is closed for the new one (they never count against
    max_connections)"""
    unix_front: Literal["threads", "uvicorn"] = "threads"
    """what serves HTTP on the unix socket: threads (an event is read, handled and answered
    by one thread, no event loop in between) or uvicorn (as the TCP listener always is)"""


class SandboxSettings(SandboxProfile):
    """The sandbox profile for every source, plus per-source overrides."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    per_source: dict[SourceKindName, dict[str, Any]] = Field(default_factory=dict)
    """per-source overrides of any key above, as tables [sandbox.per_source.enterprise] and
    so on (a network other than none is for enterprise and team hooks only)"""

    @model_validator(mode="after")
    def _overrides_are_valid(self) -> SandboxSettings:
        for name in self.per_source:
            kind = SourceKind(name)
            profile = self.profile_for(kind)
            if kind in UNMANAGED_SOURCES and profile.network != "none":
                raise ValueError(
                    f"per_source.{kind}.network: {kind} hooks get no network; "
                    "only enterprise and team hooks may be given one"
                )
        return self

    def profile_for(self, kind: SourceKind) -> SandboxProfile:
        """The effective profile of one source kind (overrides validated by SandboxProfile)."""
        base = self.model_dump(exclude={"per_source"})
        over = dict(self.per_source.get(kind, {}))  # type: ignore[call-overload]
        if "limits" in over:
            base["limits"] = {**base["limits"], **over.pop("limits")}
        return SandboxProfile.model_validate({**base, **over})


def _env_entry(value: str) -> str:
    from cloudrunner.event.hook_env import check_entry

    return check_entry(value)


EnvEntries = Annotated[list[Annotated[str, AfterValidator(_env_entry)]], Field(max_length=256)]


class HookEnvSettings(_Section):
    """Variables of the daemon's own environment passed to each source's hooks (see
    `cloudrunner.event.hook_env`): exact names, or prefixes ending in `*`; a name that looks like
    a credential passes only when listed by its exact name."""

    enterprise: EnvEntries = Field(default_factory=list)
    """variables (`CI`) or prefixes (`DEPLOY_*`) of the daemon's environment passed to enterprise
    hooks; a credential-looking name only by its exact name"""
    team: EnvEntries = Field(default_factory=list)
    """variables (`CI`) or prefixes (`DEPLOY_*`) of the daemon's environment passed to team
    hooks; a credential-looking name only by its exact name"""
    project: EnvEntries = Field(default_factory=list)
    """variables (`CI`) or prefixes (`DEPLOY_*`) of the daemon's environment passed to project
    hooks (and Claude Code hooks); a credential-looking name only by its exact name"""
    user: EnvEntries = Field(default_factory=list)
    """variables (`CI`) or prefixes (`DEPLOY_*`) of the daemon's environment passed to user
    hooks (desktop profile); a credential-looking name only by its exact name"""

    def entries(self, kind: SourceKind) -> list[str]:
        value: list[str] = getattr(self, kind, [])
        return value


class Settings(_Section):
    profile: Literal["cloud", "desktop"] = "cloud"
    """cloud: enterprise, team and project command hooks, the 14 cloud events;
    desktop: all four sources and all 21 events"""
    state_dir: Path = DEFAULT_STATE_DIR
    """session state, gate state, clones and (by default) the audit log"""
    worker_id: str = ""
    """names this worker in container labels and audit records; empty: host name"""
    hook_timeout: float = Field(default=60.0, gt=0, le=24 * 3600)
    """a hook's timeout when its definition has none (the protocol's default: 60 s)"""
    max_parallel_hooks: int = Field(default=4, ge=1, le=64)
    """hooks of one source that run at the same time"""
    max_payload_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """the largest event payload accepted on stdin"""
    matcher_timeout_ms: int = Field(default=50, ge=1, le=60_000)
    """how long one matcher may search before the hook's outcome is match_timeout"""
    sources: SourcesSettings = Field(default_factory=SourcesSettings)
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    home: HomeSettings = Field(default_factory=HomeSettings)
    egress: EgressSettings = Field(default_factory=EgressSettings)
    hook_env: HookEnvSettings = Field(default_factory=HookEnvSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)

    @model_validator(mode="after")
    def _egress_fits_the_sandbox(self) -> Settings:
        for kind in sorted(MANAGED_SOURCES, key=lambda k: k.priority):
            if (
                self.egress.rules_for(kind).policy == "allowlist"
                and self.sandbox.profile_for(kind).network != "none"
            ):
                raise ValueError(
                    f"egress.{kind}.policy is allowlist but sandbox network of {kind} is "
                    f"{self.sandbox.profile_for(kind).network!r}: an allowlist puts the hooks "
                    'on the proxy\'s internal network; set the sandbox network to "none", or '
                    'use policy "open" for that whole network'
                )
        return self

    @model_validator(mode="after")
    def _managed_paths_outside_the_workspace(self) -> Settings:
        workspace = self.workspace.path
        if workspace is None:
            return self
        for key, path in (("enterprise_hooks", self.sources.enterprise_hooks),
                          ("team_hooks", self.sources.team_hooks)):  # fmt: skip
            if path is not None and managed_path_inside(path, workspace):
                raise ValueError(
                    f"sources.{key}: {path} lies inside the workspace {workspace}, so the "
                    "repository would decide the operator's hooks; keep managed hooks outside "
                    "every checkout"
                )
        return self

    @property
    def socket_path(self) -> Path:
        return self.server.socket or self.state_dir / "cloudrunner.sock"

    @property
    def audit_path(self) -> Path:
        return self.audit.path or self.state_dir / "audit.log"

    @property
    def clone_dir(self) -> Path:
        return self.workspace.clone_dir or self.state_dir / "workspaces"

    @property
    def effective_worker_id(self) -> str:
        return self.worker_id or os.uname().nodename


#: environment variable -> dotted settings key. The names match the `run` flags.
ENV_KEYS: dict[str, str] = {
    "CLOUDRUNNER_PROFILE": "profile",
    "CLOUDRUNNER_STATE_DIR": "state_dir",
    "CLOUDRUNNER_WORKER_ID": "worker_id",
    "CLOUDRUNNER_HOOK_TIMEOUT": "hook_timeout",
    "CLOUDRUNNER_MAX_PARALLEL_HOOKS": "max_parallel_hooks",
    "CLOUDRUNNER_MAX_PAYLOAD_BYTES": "max_payload_bytes",
    "CLOUDRUNNER_MATCHER_TIMEOUT_MS": "matcher_timeout_ms",
    "CLOUDRUNNER_ENTERPRISE_HOOKS": "sources.enterprise_hooks",
    "CLOUDRUNNER_TEAM_HOOKS": "sources.team_hooks",
    "CLOUDRUNNER_TRUST_PROJECT_HOOKS": "sources.trust_project_hooks",
    "CLOUDRUNNER_CLAUDE_CODE": "sources.claude_code",
    "CLOUDRUNNER_REPO": "workspace.repo",
    "CLOUDRUNNER_REF": "workspace.ref",
    "CLOUDRUNNER_WORKSPACE": "workspace.path",
    "CLOUDRUNNER_USE_ENVIRONMENT_JSON": "workspace.use_environment_json",
    "CLOUDRUNNER_AUDIT_LOG": "audit.path",
    "CLOUDRUNNER_AUDIT_FSYNC": "audit.fsync",
    "CLOUDRUNNER_RECORD": "audit.record_path",
    "CLOUDRUNNER_ISOLATION": "sandbox.isolation",
    "CLOUDRUNNER_RUNTIME": "sandbox.runtime",
    "CLOUDRUNNER_IMAGE": "sandbox.image",
    "CLOUDRUNNER_NETWORK": "sandbox.network",
    "CLOUDRUNNER_SOCKET": "server.socket",
    "CLOUDRUNNER_LISTEN": "server.listen",
    "CLOUDRUNNER_TOKEN_FILE": "server.token_file",
}


def managed_path_inside(path: Path, workspace: Path) -> bool:
    """Whether an operator's hooks path (a file or directory, symlinks followed) lies in
    the workspace: then the repository, not the operator, would choose those hooks."""
    from cloudrunner.workspace import inside

    real = os.path.realpath(path)
    return inside(real, os.path.realpath(workspace))


def path_keys(model: type[BaseModel] = Settings, prefix: str = "") -> list[str]:
    """The dotted keys whose value is a path (a `Path` or an optional one)."""
    keys: list[str] = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += path_keys(annotation, f"{prefix}{name}.")
        elif annotation is Path or Path in getattr(annotation, "__args__", ()):
            keys.append(prefix + name)
    return keys


def _dotted(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _anchor_paths(data: dict[str, Any], config: Path) -> None:
    """Relative paths of a settings file, resolved against the file's own directory (never
    the directory the process happens to start in)."""
    base = Path(os.path.abspath(config)).parent
    for key in path_keys():
        value = _dotted(data, key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            _set_dotted(data, key, str(base / value))


def _refuse_relative(layer: Mapping[str, Any], origin: Mapping[str, str]) -> None:
    """A path given by a variable or a flag must be absolute: there is no file to be
    relative to, and the working directory is wherever the process started."""
    for key in path_keys():
        value = _dotted(layer, key)
        if isinstance(value, str | Path) and str(value) and not os.path.isabs(value):
            where = origin.get(key, "a command-line flag")
            raise SettingsError(
                f"{where} ({key}) is the relative path {str(value)!r}: give "
                "an absolute path (a relative one is allowed only in a settings file, where "
                "it is relative to the file)"
            )


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = target
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise SettingsError(f"settings key {part!r} is not a table")
        node = child
    node[leaf] = value


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise SettingsError(
            f"settings file {path} does not exist; create one with `cloudrunner config init`"
        ) from exc
    except OSError as exc:
        raise SettingsError(f"cannot read settings file {path}: {exc.strerror}") from exc
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SettingsError(f"settings file {path} is not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"settings file {path} is not valid TOML: {exc}") from exc


def _describe(exc: ValidationError, origin: str) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        problem = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        problems.append(f"{where}: {problem}")
    return f"invalid settings from {origin}: " + "; ".join(problems)


def load_settings(
    config: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults < TOML file < CLOUDRUNNER_* variables < `overrides` (dotted keys, from flags).

    `config` None means CLOUDRUNNER_CONFIG, else the first default path that exists.
    """
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    origin = "defaults"
    if config is None and env.get("CLOUDRUNNER_CONFIG"):
        config = Path(env["CLOUDRUNNER_CONFIG"])
    if config is None:
        config = next((p for p in DEFAULT_CONFIG_PATHS if p.is_file()), None)
    if config is not None:
        data = read_toml(config)
        origin = str(config)
        _anchor_paths(data, config)
        try:
            Settings.model_validate(data)
        except ValidationError as exc:
            raise SettingsError(_describe(exc, origin)) from exc
    env_layer: dict[str, Any] = {}
    for name, dotted in ENV_KEYS.items():
        value = env.get(name)
        if value is not None and value != "":
            _set_dotted(env_layer, dotted, value)
    flag_layer: dict[str, Any] = {}
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_dotted(flag_layer, dotted, value)
    _refuse_relative(env_layer, {key: name for name, key in ENV_KEYS.items()})
    _refuse_relative(flag_layer, {})
    try:
        settings = Settings.model_validate(_deep_merge(data, env_layer))
    except ValidationError as exc:
        raise SettingsError(_describe(exc, "CLOUDRUNNER_* environment variables")) from exc
    try:
        return Settings.model_validate(_deep_merge(settings.model_dump(), flag_layer))
    except ValidationError as exc:
        raise SettingsError(_describe(exc, "command-line flags")) from exc


def to_toml(settings: Settings) -> str:
    """The effective settings as TOML (None values, which TOML cannot hold, are left out)."""
    return tomli_w.dumps(_without_none(settings.model_dump(mode="json")))


def _without_none(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if item is None:
            continue
        out[key] = _without_none(item) if isinstance(item, dict) else item
    return out


def _commented(model: type[BaseModel], values: Mapping[str, Any], table: str) -> list[str]:
    lines: list[str] = []
    nested: list[tuple[str, type[BaseModel], Mapping[str, Any]]] = []
    dict_tables: list[tuple[str, str, Mapping[str, Any]]] = []
    for name, field in model.model_fields.items():
        value = values.get(name)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested.append((name, annotation, value or {}))
            continue
        if not isinstance(value, dict):
            lines += [f"# {text.strip()}" for text in (field.description or "").splitlines()]
        if value is None:
            lines.append(f"# {name} =   (unset by default)")
        elif isinstance(value, dict):
            title = f"{table}.{name}" if table else name
            dict_tables.append((title, field.description or "", value))
        else:
            lines.append(tomli_w.dumps({name: value}).strip())
    for title, description, mapping in dict_tables:
        lines += ["", *[f"# {t.strip()}" for t in description.splitlines()], f"[{title}]"]
        if mapping:
            lines.append(tomli_w.dumps(dict(mapping)).strip())
    for name, sub, sub_values in nested:
        title = f"{table}.{name}" if table else name
        lines += ["", f"[{title}]", *_commented(sub, sub_values, title)]
    return lines


def default_toml() -> str:
    """A commented default settings file, for `cloudrunner config init`."""
    header = [
        "# cloudrunner worker settings.",
        "# Precedence: these < CLOUDRUNNER_* environment variables < command-line flags.",
        "",
    ]
    values = Settings().model_dump(mode="json")
    return "\n".join(header + _commented(Settings, values, "")) + "\n"


def source_settings(settings: Settings, root: Path | None, trusted: bool = True) -> SourceSettings:
    """The sources of `settings` for the workspace `root` (None: the operator's alone);
    `trusted` False when the workspace's own trust withholds its project hooks. Here, not in
    the sources package, so that the sources never import the settings."""
    from cloudrunner.sources import SourceSettings

    sources = settings.sources
    digests = sources.project_digests
    return SourceSettings(
        workspace=root,
        profile=Profile(settings.profile),
        enterprise_path=sources.enterprise_hooks,
        team_path=sources.team_hooks,
        user_home=sources.user_home,
        trust_workspace=sources.trust_project_hooks and trusted,
        allowed=frozenset(sources.allowed),
        project_digests=None if digests is None else frozenset(digests),
        project_digest_paths=tuple(sources.project_digest_paths),
        claude_code=sources.claude_code,
    )
