"""A hook's command line as its shell reads it: syntax (the words, redirections and nested
commands of a command line, and what a static reading cannot tell), programs (what common
programs do with their arguments: shells, cd, inline code, the files they run). Pinning and
`validate` read hooks through it."""

from cloudrunner.shell.syntax import (
    MAX_COMMAND_CHARS,
    WORKSPACE_VARIABLES,
    ParsedCommand,
    SimpleCommand,
    Uncertain,
    parse,
)

__all__ = [
    "MAX_COMMAND_CHARS",
    "WORKSPACE_VARIABLES",
    "ParsedCommand",
    "SimpleCommand",
    "Uncertain",
    "parse",
]
