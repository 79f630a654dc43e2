"""A repository's `.cursor/environment.json` image: built once per environment file and
commit, and its `install` command run once per image and commit (recorded).

The stage builds nothing and opens nothing itself: the image comes from an `ImageBuilder`
(the engine, in a worker) and the install runs in a sandbox the `SandboxProvider` opens,
the same provider that opens the hooks' sandboxes.
"""

from __future__ import annotations

from typing import Protocol

from cloudrunner import images as project_environment
from cloudrunner import workspace
from cloudrunner.audit import AuditWriter, RecordKind
from cloudrunner.event import record_builders
from cloudrunner.event.sandbox_profiles import SandboxProfiles
from cloudrunner.event.sandboxes import SandboxProvider
from cloudrunner.event.workspaces import locked
from cloudrunner.protocol.outcomes import Outcome
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sandbox.base import ExecRequest, SandboxLabels, SandboxSpec
from cloudrunner.settings import Settings


class ImageBuilder(Protocol):
    def build_image(
        self, env: project_environment.ProjectEnvironment
    ) -> project_environment.EnvironmentImage:
        """The image `env` describes (built, or one built before); raises
        EnvironmentFileError or EnvironmentBuildError."""
        ...


class EnvironmentImages:
    def __init__(
        self,
        settings: Settings,
        profiles: SandboxProfiles,
        images: ImageBuilder,
        sandboxes: SandboxProvider,
        audit: AuditWriter,
    ) -> None:
        self.settings = settings
        self.profiles = profiles
        self.images = images
        self.sandboxes = sandboxes
        self.audit = audit
        self._images: dict[tuple[str, str, str], str] = {}

    def image_for(self, ws: workspace.Workspace, session: str) -> str | None:
        """The image of the repository's .cursor/environment.json (built, and its `install`
        run once per image and commit), or None to use the configured image.

        Called when the first project hook of an event needs its sandbox, so a failure
        here is that hook's sandbox_error (a block for failClosed hooks), not the worker's.
        """
        if not self.settings.workspace.use_environment_json:
            return None
        env = project_environment.load_environment(ws.root)
        if env is None or not env.has_build:
            return None
        # A long-lived worker asks the engine once per environment file and commit (an
        # uncommitted change to the build context is picked up at the next commit).
        key = (str(ws.root), ws.commit or "", env.sha256)
        if key in self._images:
            return self._images[key]
        built = self.images.build_image(env)
        if env.install:
            self._install_once(ws, env.install, built, session)
        self._images[key] = built.tag
        return built.tag

    def _install_once(
        self,
        ws: workspace.Workspace,
        install: str,
        built: project_environment.EnvironmentImage,
        session: str,
    ) -> None:
        """Run `install` in the built image against the workspace, unless a marker in the
        state directory says it ran for this image and commit (by any worker on it)."""
        marker_dir = self.settings.state_dir / "environments"
        marker = marker_dir / f"{built.key[:24]}-{(ws.commit or 'no-commit')[:12]}.installed"
        with locked(marker_dir / ".install.lock"):
            if marker.exists():
                return
            profile = self.profiles.for_kind(SourceKind.PROJECT).model_copy(
                update={"image": built.tag, "isolation": "hook"}
            )
            labels = SandboxLabels(
                worker=self.settings.effective_worker_id, session=session, source="install"
            )
            spec = SandboxSpec(workspace=ws.root, labels=labels, profile=profile)
            with self.sandboxes.open_spec(spec) as sandbox:
                result = sandbox.run(
                    ExecRequest(
                        command=install,
                        cwd=str(ws.root),
                        env={"CURSOR_PROJECT_DIR": str(ws.root), "CURSOR_CODE_REMOTE": "true"},
                        timeout_s=self.settings.workspace.install_timeout,
                    )
                )
            fields = record_builders.environment(
                self.audit, image=built.tag, image_id=built.image_id, built=built.built,
                install=install, commit=ws.commit, result=result,
            )  # fmt: skip
            record_builders.append(self.audit, (RecordKind.ENVIRONMENT, fields))
            if result.outcome is not Outcome.OK:
                said = result.message or result.stderr.decode(errors="replace").strip()[-300:]
                raise project_environment.EnvironmentBuildError(
                    f"the install command of {ws.environment_file} failed "
                    f"({result.outcome}, exit {result.exit_code}: {_one_line(said)}); "
                    "project hooks cannot run in that environment until it is fixed"
                )
            marker.write_text(f"{built.image_id}\n{ws.commit}\n")


def _one_line(text: str) -> str:
    """`text` as one line of printable characters (the install's stderr is the repository's
    to choose: its line breaks and terminal escapes stay out of the reason)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())
