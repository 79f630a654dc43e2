"""One agent event from payload to answer, as a pipeline of named stages.

`pipeline` runs the stages in order; `intake` reads the payload once; `workspaces`,
`homes`, `environments` and `sandboxes` each hold one kind of prepared thing and its cache;
`sandbox_profiles` sits below them all; `record_builders` builds every record the event
writes. Its names are exported lazily: `cloudrunner gate` imports the gate without the rest
of the event path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudrunner import lazy_export

if TYPE_CHECKING:
    from cloudrunner.event.engine_access import Engine, reap_orphans
    from cloudrunner.event.environments import EnvironmentImages
    from cloudrunner.event.gate import (
        STATE_DIR_ENV,
        GateError,
        GateMode,
        ProbeResult,
        default_hook_user,
        evaluate,
        probe_writable,
        read_state,
        set_mode,
    )
    from cloudrunner.event.homes import Homes
    from cloudrunner.event.hook_env import check_entry
    from cloudrunner.event.hook_home import remove_all as remove_homes
    from cloudrunner.event.pipeline import EventPipeline, EventReply
    from cloudrunner.event.sandbox_profiles import SandboxProfiles
    from cloudrunner.event.sandboxes import EngineSandboxes, SandboxProvider
    from cloudrunner.event.session import SessionStore
    from cloudrunner.event.stage_errors import (
        AUDIT_UNWRITABLE_EXIT,
        EventNotRecorded,
        PayloadRefused,
        Refusal,
    )
    from cloudrunner.event.workspaces import Workspaces

#: each name is imported from its module on first use (`cloudrunner.lazy_export`)
_WHERE = {
    "Engine": "cloudrunner.event.engine_access",
    "reap_orphans": "cloudrunner.event.engine_access",
    "EnvironmentImages": "cloudrunner.event.environments",
    "STATE_DIR_ENV": "cloudrunner.event.gate",
    "GateError": "cloudrunner.event.gate",
    "GateMode": "cloudrunner.event.gate",
    "ProbeResult": "cloudrunner.event.gate",
    "default_hook_user": "cloudrunner.event.gate",
    "evaluate": "cloudrunner.event.gate",
    "probe_writable": "cloudrunner.event.gate",
    "read_state": "cloudrunner.event.gate",
    "set_mode": "cloudrunner.event.gate",
    "Homes": "cloudrunner.event.homes",
    "remove_homes": "cloudrunner.event.hook_home:remove_all",
    "check_entry": "cloudrunner.event.hook_env",
    "EventPipeline": "cloudrunner.event.pipeline",
    "EventReply": "cloudrunner.event.pipeline",
    "SandboxProfiles": "cloudrunner.event.sandbox_profiles",
    "EngineSandboxes": "cloudrunner.event.sandboxes",
    "SandboxProvider": "cloudrunner.event.sandboxes",
    "SessionStore": "cloudrunner.event.session",
    "AUDIT_UNWRITABLE_EXIT": "cloudrunner.event.stage_errors",
    "EventNotRecorded": "cloudrunner.event.stage_errors",
    "PayloadRefused": "cloudrunner.event.stage_errors",
    "Refusal": "cloudrunner.event.stage_errors",
    "Workspaces": "cloudrunner.event.workspaces",
}


def __getattr__(name: str) -> Any:
    return lazy_export(globals(), _WHERE, name)


__all__ = [
    "AUDIT_UNWRITABLE_EXIT",
    "STATE_DIR_ENV",
    "Engine",
    "EngineSandboxes",
    "EnvironmentImages",
    "EventNotRecorded",
    "EventPipeline",
    "EventReply",
    "GateError",
    "GateMode",
    "Homes",
    "PayloadRefused",
    "ProbeResult",
    "Refusal",
    "SandboxProfiles",
    "SandboxProvider",
    "SessionStore",
    "Workspaces",
    "check_entry",
    "default_hook_user",
    "evaluate",
    "probe_writable",
    "read_state",
    "reap_orphans",
    "remove_homes",
    "set_mode",
]
