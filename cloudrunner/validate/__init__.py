"""`cloudrunner validate`: checking hooks files before any event.

report (the targets, each hook's verdict, the report and its text), checks (a hook's
programs, scripts and matcher, pure logic), policy (what the operator's policy says of a
source or a hook: digests, egress), image_programs (an image's PATH programs, listed once
per image id in a throwaway container).
"""

from cloudrunner.validate.checks import (
    ProgramUse,
    ScriptUse,
    programs_of,
    script_problem,
    shebang_program,
    simple_commands,
)
from cloudrunner.validate.image_programs import (
    ImageCheckUnavailable,
    ImagePrograms,
    list_programs,
    parse_listing,
)
from cloudrunner.validate.policy import network_needs, network_uses
from cloudrunner.validate.report import (
    FileReport,
    HookVerdict,
    Target,
    ValidationReport,
    image_programs_for,
    render_text,
    resolve_target,
    resolve_targets,
    validate_file,
    validate_paths,
)

__all__ = [
    "FileReport",
    "HookVerdict",
    "ImageCheckUnavailable",
    "ImagePrograms",
    "ProgramUse",
    "ScriptUse",
    "Target",
    "ValidationReport",
    "image_programs_for",
    "list_programs",
    "network_needs",
    "network_uses",
    "parse_listing",
    "programs_of",
    "render_text",
    "resolve_target",
    "resolve_targets",
    "script_problem",
    "shebang_program",
    "simple_commands",
    "validate_file",
    "validate_paths",
]
