"""Matchers (spec section 4): which hooks of an event apply to one payload.

A matcher is a regular expression searched, unanchored, in one field of the input (the
field per event lives in `events.EVENTS`). No matcher, an empty one, or `*` matches
everything. On an event with no matcher field the matcher does not filter (validation warns).
A matcher that does not compile never matches; the plan turns that into a skipped hook, or a
block when the hook is failClosed.

Matchers are JavaScript regular expressions (Cursor's semantics; `js_regex` translates them)
run by the `regex` engine, which stops a search after a time budget and releases the GIL
while it searches: a pathological pattern costs at most its budget and stalls no other
thread. A search over budget is a `match_timeout`, its own outcome (a block when failClosed).
The engine counts the budget in CPU time of the process (measured: four searches at once
each time out when the process has spent the budget), so a long search ends sooner, never
later, when other threads are busy; on the clock it may take longer on a loaded machine.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import regex

from cloudrunner.protocol.events import EventInput, EventSpec
from cloudrunner.protocol.js_regex import JsSyntaxError, Translation, code_units, translate

#: the search budget of one matcher evaluation when the caller gives none (worker setting
#: `matcher_timeout_ms`)
DEFAULT_MATCH_TIMEOUT_S = 0.05

#: how a matcher is compiled: ASCII makes \\d, \\w and \\b JavaScript's; V0 keeps the
#: `re`-compatible syntax the translation targets
_FLAGS = regex.ASCII | regex.V0

#: a subject longer than this is searched only in its first part, so one huge command string
#: cannot make a matcher search expensive (hooks still receive the whole payload)
SUBJECT_LIMIT = 64 * 1024


@dataclass(frozen=True)
class CompiledMatcher:
    source: str | None
    pattern: regex.Pattern[str] | None
    #: the compile error, when the matcher is not a valid regular expression
    error: str | None
    #: how the JavaScript pattern was read (None for match-everything or invalid matchers)
    translation: Translation | None = None

    @property
    def matches_everything(self) -> bool:
        return self.error is None and self.pattern is None

    @property
    def valid(self) -> bool:
        return self.error is None


@functools.lru_cache(maxsize=1024)
def compile_matcher(source: str | None) -> CompiledMatcher:
    """Compile once per pattern (cached: a worker sees the same few matchers on every event)."""
    if source is None or source == "" or source == "*":
        return CompiledMatcher(source, None, None)
    try:
        translation = translate(source)
        pattern = regex.compile(translation.pattern, _FLAGS)
    except JsSyntaxError as exc:
        return CompiledMatcher(source, None, str(exc))
    except (regex.error, OverflowError, RecursionError, ValueError) as exc:
        return CompiledMatcher(source, None, f"{exc}")
    return CompiledMatcher(source, pattern, None, translation)


@dataclass(frozen=True)
class MatchResult:
    matched: bool
    #: the string the matcher was searched in (None when the matcher did not need one)
    subject: str | None
    reason: str
    #: the search went over its budget: neither a match nor a miss (outcome match_timeout)
    timed_out: bool = False


def match(
    matcher: CompiledMatcher,
    spec: EventSpec,
    payload: EventInput,
    *,
    timeout_s: float = DEFAULT_MATCH_TIMEOUT_S,
) -> MatchResult:
    if matcher.error is not None:
        return MatchResult(False, None, f"invalid matcher {matcher.source!r}: {matcher.error}")
    if matcher.pattern is None:
        shown = "no matcher" if not matcher.source else f"matcher {matcher.source!r}"
        return MatchResult(True, None, f"{shown} matches everything")
    if spec.matcher_subject is None:
        return MatchResult(
            True, None, f"{spec.name} has no matcher field, so the matcher does not filter"
        )
    # A payload without the field is matched as the empty string: a matcher that needs the
    # field then does not match, and one that accepts anything still does.
    subject = spec.matcher_subject(payload) or ""
    try:
        units = code_units(subject[:SUBJECT_LIMIT])
        found = matcher.pattern.search(units, timeout=timeout_s) is not None
    except TimeoutError:
        shown = subject if len(subject) <= 200 else subject[:197] + "..."
        return MatchResult(
            False,
            subject,
            f"match_timeout: matcher {matcher.source!r} was still searching {shown!r} after "
            f"its {timeout_s * 1000:g} ms budget (matcher_timeout_ms)",
            timed_out=True,
        )
    verb = "matches" if found else "does not match"
    return MatchResult(found, subject, f"matcher {matcher.source!r} {verb} {subject!r}")
