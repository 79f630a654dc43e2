"""`cloudrunner vm`: a cloud agent's VM set up in one step.

provisioning (the agent's hooks file routing the cloud events to the per-event client, the
systemd unit running the daemon, and the check of an existing hooks file), dependencies
(what `vm --check` finds missing on the VM: the engine, runsc, the images, the client).
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
    "check",
    "environment_assignment",
    "exec_word",
    "find_client",
    "foreign_entries",
    "missing",
    "plan",
    "read_hooks_file",
    "serve_argv",
    "systemd_unit",
    "write_file",
]
