"""Matchers (spec section 4): which hooks of an event apply to one payload.

A matcher is a regular expression searched, unanchored, in one field of the input (the
field per event lives in `events.EVENTS`). No matcher, an empty one, or `*` matches
everything. On an event with no matcher field the matcher does not filter (validation warns).
A matcher that does not compile never matches; the plan turns that into a skipped hook, or a
block when the hook is failClosed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cloudrunner.protocol.events import EventInput, EventSpec

#: a subject longer than this is searched only in its first part, so one huge command string
#: cannot make a matcher search expensive (hooks still receive the whole payload)
SUBJECT_LIMIT = 64 * 1024


@dataclass(frozen=True)
class CompiledMatcher:
    source: str | None
    pattern: re.Pattern[str] | None
    #: the compile error, when the matcher is not a valid regular expression
    error: str | None

    @property
    def matches_everything(self) -> bool:
        return self.error is None and self.pattern is None

    @property
    def valid(self) -> bool:
        return self.error is None


def compile_matcher(source: str | None) -> CompiledMatcher:
    if source is None or source == "" or source == "*":
        return CompiledMatcher(source, None, None)
    try:
        return CompiledMatcher(source, re.compile(source), None)
    except (re.error, OverflowError, RecursionError) as exc:
        return CompiledMatcher(source, None, f"{exc}")


@dataclass(frozen=True)
class MatchResult:
    matched: bool
    #: the string the matcher was searched in (None when the matcher did not need one)
    subject: str | None
    reason: str


def match(matcher: CompiledMatcher, spec: EventSpec, payload: EventInput) -> MatchResult:
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
    found = matcher.pattern.search(subject[:SUBJECT_LIMIT]) is not None
    verb = "matches" if found else "does not match"
    return MatchResult(found, subject, f"matcher {matcher.source!r} {verb} {subject!r}")
