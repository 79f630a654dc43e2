"""docs/reference/events.md: the 21 events, what each carries and may answer, from the
event table the worker itself runs on (`cloudrunner.protocol.events.EVENTS`)."""

from __future__ import annotations

from cloudrunner.protocol.events import EVENTS, EventInput, EventSpec
from docsgen.markdown import GENERATED_NOTE, code, table


def _own_inputs(spec: EventSpec) -> str:
    base = set(EventInput.model_fields)
    own = [n for n in spec.input_model.model_fields if n not in base]
    return ", ".join(code(n) for n in own)


def _outputs(spec: EventSpec) -> str:
    fields = [code(f) for f in spec.output_fields]
    return ", ".join(fields) if fields else "none (any JSON object; its fields are ignored)"


def _decision(spec: EventSpec) -> str:
    if spec.permissions:
        values = "/".join(sorted(spec.permissions, key=("allow", "deny", "ask").index))
        text = f"permission ({values})"
        return text + ("; ask counts as deny" if spec.ask_means_deny else "")
    if spec.can_block:
        return "`continue: false` blocks"
    return "none"


def _matcher(spec: EventSpec) -> str:
    if spec.matcher_subject is None:
        return "none: a matcher is a warning and does not filter"
    return spec.matcher_describes or ""


def _not_in_cloud_row(spec: EventSpec) -> tuple[str, ...]:
    reason = spec.not_in_cloud_reason or ""
    return (code(spec.name), reason, _own_inputs(spec), _outputs(spec), _decision(spec))


def render() -> str:
    cloud = [s for s in EVENTS.values() if s.in_cloud]
    other = [s for s in EVENTS.values() if not s.in_cloud]
    base = ", ".join(code(n) for n in EventInput.model_fields)
    out = [
        "# Events",
        "",
        GENERATED_NOTE,
        f"Every event's input carries the base fields {base}, plus its own fields below.",
        "Unknown input fields are kept and passed to hooks unchanged; every known field is",
        "optional. Output fields are checked for type and allowed values (`null` counts as",
        "not given); unknown output fields are ignored and reported.",
        "",
        f"## The {len(cloud)} events cloud agents run",
        "",
        table(
            ("event", "own input fields", "output fields", "decision", "matcher is searched in"),
            [(code(s.name), _own_inputs(s), _outputs(s), _decision(s), _matcher(s)) for s in cloud],
        ),
        f"## The {len(other)} events cloud agents do not run",
        "",
        "In the cloud profile these are refused (exit 2 from `run`, HTTP 422",
        "`event-not-in-cloud` from the daemon) with the reason below; the desktop profile",
        "runs them.",
        "",
        table(
            ("event", "why not in cloud agents", "own input fields", "output fields", "decision"),
            [_not_in_cloud_row(s) for s in other],
        ),
        "## Follow-up messages",
        "",
        "Events whose answer may carry `followup_message`, counted against the hook's",
        "`loop_limit`: " + ", ".join(code(s.name) for s in EVENTS.values() if s.follows_up) + ".",
    ]
    return "\n".join(out).rstrip() + "\n"
