"""Where each value of a JSON document starts, by JSON pointer, as line and column.

`json.loads` says where a syntax error is, but not where a valid value lives; diagnostics about
types and keys need that too. This is a small scanner over text that `json.loads` has already
accepted, run only for files that have a located diagnostic, so it can assume well-formed
input and stay simple.
"""

from __future__ import annotations

import contextlib
import json
import re
from bisect import bisect_right
from dataclasses import dataclass

from cloudrunner.protocol.diagnostics import pointer_join

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")


@dataclass(frozen=True)
class Span:
    #: offset of the member's key (None for array items and the root)
    key: int | None
    value: int


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: dict[str, Span] = {}
        #: (pointer, key offset) of each key repeated within one object, after its first use
        self.duplicates: list[tuple[str, int]] = []

    def skip(self, i: int) -> int:
        m = _WS.match(self.text, i)
        return m.end() if m else i

    def string(self, i: int) -> tuple[str, int]:
        m = _STRING.match(self.text, i)
        if m is None:
            raise ValueError(f"no string at offset {i}")
        decoded: str = json.loads(m.group())
        return decoded, m.end()

    def value(self, i: int, pointer: str, key: int | None) -> int:
        i = self.skip(i)
        self.spans.setdefault(pointer, Span(key, i))
        ch = self.text[i]
        if ch == "{":
            i = self.skip(i + 1)
            if self.text[i] == "}":
                return i + 1
            seen: set[str] = set()
            while True:
                i = self.skip(i)
                key_at = i
                name, i = self.string(i)
                if name in seen:
                    self.duplicates.append((pointer_join(pointer, name), key_at))
                seen.add(name)
                i = self.skip(i) + 1  # the colon
                i = self.skip(self.value(i, pointer_join(pointer, name), key_at))
                if self.text[i] == "}":
                    return i + 1
                i += 1  # the comma
        if ch == "[":
            i = self.skip(i + 1)
            if self.text[i] == "]":
                return i + 1
            index = 0
            while True:
                i = self.skip(self.value(i, pointer_join(pointer, index), None))
                index += 1
                if self.text[i] == "]":
                    return i + 1
                i += 1
        if ch == '"':
            return self.string(i)[1]
        m = _SCALAR.match(self.text, i)
        if m is None:
            raise ValueError(f"unexpected character at offset {i}")
        return m.end()


class PositionIndex:
    """Line and column (both 1-based) of keys and values in one JSON text."""

    def __init__(self, text: str) -> None:
        self._newlines = [i for i, ch in enumerate(text) if ch == "\n"]
        scanner = _Scanner(text)
        # A document json.loads accepted but this scanner does not follow (or one nested too
        # deep): positions are a convenience, so keep what was found so far.
        with contextlib.suppress(ValueError, IndexError, RecursionError):
            scanner.value(0, "", None)
        self._spans = scanner.spans
        self.duplicates = tuple(
            (pointer, *self.line_column(at)) for pointer, at in scanner.duplicates
        )

    def line_column(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self._newlines, offset - 1)
        start = self._newlines[line - 1] + 1 if line else 0
        return line + 1, offset - start + 1

    def find(self, pointer: str, *, key: bool = False) -> tuple[int, int] | None:
        """The position of the value at `pointer` (of its key, when `key` and it has one);
        for a pointer that does not exist, the position of its nearest existing parent."""
        probe = pointer
        while True:
            span = self._spans.get(probe)
            if span is not None:
                at = span.key if (key and probe == pointer and span.key is not None) else span.value
                return self.line_column(at)
            if not probe:
                return None
            probe = probe.rsplit("/", 1)[0]
