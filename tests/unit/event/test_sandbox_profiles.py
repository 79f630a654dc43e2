"""The profiles a source's sandbox is opened with: made once per (kind, network, image),
and bounded however many sessions' networks come and go."""

from __future__ import annotations

from cloudrunner.event.sandbox_profiles import SandboxProfiles
from cloudrunner.settings import Settings


def test_the_same_combination_is_the_same_profile_and_each_change_is_applied() -> None:
    profiles = SandboxProfiles(Settings())
    first = profiles.for_open("project", "net-a", None)
    assert profiles.for_open("project", "net-a", None) is first
    assert first.network == "net-a"
    other = profiles.for_open("project", "net-b", "img:1")
    assert (other.network, other.image) == ("net-b", "img:1")
    assert profiles.for_kind("project").network != "net-a", "the kind's own profile is kept"


def test_a_network_per_session_does_not_grow_the_profiles_without_end() -> None:
    profiles = SandboxProfiles(Settings())
    for session in range(3000):
        profiles.for_open("project", f"cloudrunner-egress-s{session}", None)
    assert len(profiles._open_profiles) <= 1024
    latest = profiles.for_open("project", "cloudrunner-egress-s2999", None)
    assert latest.network == "cloudrunner-egress-s2999"
