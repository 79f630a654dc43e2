"""A SandboxProvider with no engine, for the event stages' unit tests: each command's
answer comes from a table, and every request and spec it was asked for is kept."""

from __future__ import annotations

from cloudrunner.closing import ClosesOnExit
from cloudrunner.event.sandboxes import SandboxRequest
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sandbox.base import ExecRequest, ExecResult, SandboxConfigError, SandboxSpec

#: a command's (exit code, stdout, stderr)
Answers = dict[str, tuple[int, str, str]]


class FakeSandbox(ClosesOnExit):
    def __init__(self, answers: Answers, ran: list[str], sandbox_id: str = "fake-1") -> None:
        self.answers = answers
        self.ran = ran
        self.sandbox_id = sandbox_id
        self.closed = False

    def run(self, request: ExecRequest) -> ExecResult:
        self.ran.append(request.command)
        code, out, err = self.answers.get(request.command, (0, "{}", ""))
        # as the engine's sandboxes say it: ok for exit 0, error for any other exit
        outcome = Outcome.OK if code == 0 else Outcome.ERROR
        return ExecResult(code, out.encode(), err.encode(), 0.001, outcome, "", self.sandbox_id, {})

    def close(self) -> None:
        self.closed = True


class FakeSandboxes:
    """Each hook's answer by its command; the sources in `broken` fail to open, as a
    missing image or a dead engine would (and so do specs when `specs_broken`)."""

    warm = False

    def __init__(
        self,
        answers: Answers | None = None,
        broken: frozenset[SourceKind] = frozenset(),
        *,
        specs_broken: bool = False,
    ) -> None:
        self.answers = answers or {}
        self.broken = broken
        self.specs_broken = specs_broken
        self.ran: list[str] = []
        self.requests: list[SandboxRequest] = []
        self.specs: list[SandboxSpec] = []
        self.opened: list[FakeSandbox] = []

    def open(self, request: SandboxRequest) -> FakeSandbox:
        self.requests.append(request)
        if request.kind in self.broken:
            raise SandboxConfigError(f"no sandbox for {request.kind} hooks here")
        return self._sandbox()

    def open_spec(self, spec: SandboxSpec) -> FakeSandbox:
        self.specs.append(spec)
        if self.specs_broken:
            raise SandboxConfigError(f"no sandbox for image {spec.profile.image} here")
        return self._sandbox()

    def _sandbox(self) -> FakeSandbox:
        sandbox = FakeSandbox(self.answers, self.ran)
        self.opened.append(sandbox)
        return sandbox
