"""`cloudrunner vm`: a cloud agent's VM set up in one step.

provisioning (the agent's hooks file routing the cloud events to the per-event client, the
systemd unit running the daemon, and the check of an existing hooks file), dependencies
(what `vm --check` finds missing on the VM: the engine, runsc, the images, the client),
self_calls (the agent's hooks file found where the fleet's hooks should be: a daemon that
would call its own client, refused before `serve` or `vm` starts).
"""

from cloudrunner.vm.dependencies import missing
from cloudrunner.vm.provisioning import (
    CLIENT_NAMES,
    COMPILED_CLIENT,
    MARGIN_S,
    MAX_AGENT_TIMEOUT_S,
    Client,
    EventNeed,
    Plan,
    VmSetupError,
    agent_hooks,
    check,
    environment_assignment,
    exec_word,
    find_client,
    foreign_entries,
    plan,
    read_hooks_file,
    serve_argv,
    systemd_unit,
    write_file,
)
from cloudrunner.vm.self_calls import calls_client, client_calls, self_call_problem

__all__ = [
    "CLIENT_NAMES",
    "COMPILED_CLIENT",
    "MARGIN_S",
    "MAX_AGENT_TIMEOUT_S",
    "Client",
    "EventNeed",
    "Plan",
    "VmSetupError",
    "agent_hooks",
    "calls_client",
    "check",
    "client_calls",
    "environment_assignment",
    "exec_word",
    "find_client",
    "foreign_entries",
    "missing",
    "plan",
    "read_hooks_file",
    "self_call_problem",
    "serve_argv",
    "systemd_unit",
    "write_file",
]
