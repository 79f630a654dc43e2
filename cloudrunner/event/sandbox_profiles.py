"""The sandbox profile of each source kind, and of each source's sandbox as it is opened.

Below every stage that needs a profile (the gate's probe, homes, environment images,
sandboxes): settings do not change under a worker, so each is made once.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from cloudrunner.errors import CloudrunnerError
from cloudrunner.memo import BoundedMemo
from cloudrunner.protocol.profiles import SourceKind
from cloudrunner.sandbox.container_plan import identity_for
from cloudrunner.sandbox.limits import SandboxProfile, machine_cores, session_quota
from cloudrunner.settings import Settings


class SandboxProfiles:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        #: the effective profile of each source kind (`profile_for` validates a pydantic
        #: model per call)
        self._profiles: dict[SourceKind, SandboxProfile] = {}
        #: each source's profile as its sandbox gets it, by (kind, network, image); bounded,
        #: since an allowlisted source has a network per session
        self._open_profiles: BoundedMemo[
            tuple[SourceKind, str | None, str | None], SandboxProfile
        ] = BoundedMemo(1024)

    def for_kind(self, kind: SourceKind) -> SandboxProfile:
        found = self._profiles.get(kind)
        if found is None:
            found = self._profiles[kind] = self.settings.sandbox.profile_for(kind)
        return found

    def identity(self, kind: SourceKind, root: Path) -> tuple[int, int]:
        """The uid and gid `kind`'s hooks run as in `root`."""
        return identity_for(self.for_kind(kind), root)

    def probe_user(self, root: Path) -> tuple[int, int] | None:
        """Who the gate's probe writes as: the project hooks' identity (None when it cannot
        be told; the probe then says the workspace cannot be read)."""
        try:
            return self.identity(SourceKind.PROJECT, root)
        except CloudrunnerError:
            return None

    def hook_uids(self, root: Path) -> set[int]:
        """Every uid hooks of a source may run as in `root` (profiles may differ per source)."""
        uids = set()
        for kind in SourceKind:
            with contextlib.suppress(CloudrunnerError):
                uids.add(self.identity(kind, root)[0])
        return uids

    def for_open(self, kind: SourceKind, network: str | None, image: str | None) -> SandboxProfile:
        """The profile a source's sandbox gets: its own, with the egress network, the
        repository's environment image and the session quota applied (made once per
        combination: model copies cost more than the rest of opening a warm sandbox)."""
        key = (kind, network, image)
        found = self._open_profiles.get(key)
        if found is not None:
            return found
        profile = self.for_kind(kind)
        if network is not None:
            profile = profile.model_copy(update={"network": network})
        if image is not None:
            profile = profile.model_copy(update={"image": image})
        if profile.isolation == "session":
            # a session container's hooks share its quota: enough for the parallel ones
            limits = profile.limits
            cpus = session_quota(
                limits.cpus, self.settings.max_parallel_hooks, machine_cores(),
                limits.session_cpus,
            )  # fmt: skip
            wider = limits.model_copy(update={"cpus": cpus})
            profile = profile.model_copy(update={"limits": wider})
        self._open_profiles.put(key, profile)
        return profile
