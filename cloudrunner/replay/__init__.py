"""`cloudrunner replay`: event streams and running them again.

stream (the stream format: recorded and hand-written events with their expected answers,
JSON lines or TOML), rerun (each event of a stream through the full pipeline, and the
report of every answer that differs), recording (an event's entry for the stream, as
`run --record` and `serve --record` write it: on the event path, which imports it as a
module, not through this package, whose rerun runs the worker).
"""

from cloudrunner.replay import recording
from cloudrunner.replay.recording import build_entry, record_event
from cloudrunner.replay.rerun import (
    ANSWER_WIDTH,
    EventResult,
    HookChange,
    ReplayError,
    ReplayReport,
    answer_lines,
    differences,
    hook_changes,
    render_text,
    replay_payload,
    run_replay,
)
from cloudrunner.replay.stream import (
    STREAM_FORMAT,
    Stream,
    StreamError,
    StreamEvent,
    append_entry,
    load_stream,
    parse_entry,
    rewrite_stream,
)

__all__ = [
    "ANSWER_WIDTH",
    "STREAM_FORMAT",
    "EventResult",
    "HookChange",
    "ReplayError",
    "ReplayReport",
    "Stream",
    "StreamError",
    "StreamEvent",
    "answer_lines",
    "append_entry",
    "build_entry",
    "differences",
    "hook_changes",
    "load_stream",
    "parse_entry",
    "record_event",
    "recording",
    "render_text",
    "replay_payload",
    "rewrite_stream",
    "run_replay",
]
