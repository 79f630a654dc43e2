"""ECMAScript regular expressions, as Cursor evaluates matchers, translated for `regex`.

Cursor is a JavaScript application: a matcher is `new RegExp(matcher)` (no flags, not the
`u` mode, so the web-compatibility grammar of Annex B applies). The `regex` package runs the
translation, because it can stop a search after a time budget and releases the GIL while
it searches. Where the two dialects differ, the translation spells out the JavaScript
meaning:

- `$` matches only at the very end (Python's `$` also matches before a final newline);
- `.` matches anything but the four JavaScript line terminators (\\n, \\r, U+2028, U+2029);
- `\\d`, `\\w`, `\\b` are ASCII; `\\s` is JavaScript's white space set (ASCII white space,
  U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF);
- `[^]` matches any character, newline included, and `[]` matches nothing;
- `(?<name>...)` and `\\k<name>` are named groups and their back references; a reference
  to a group that has not captured (later, still open, or not taken) matches the empty
  string; a quantified lookbehind is an error;
- an escaped letter that JavaScript does not define (`\\A`, `\\Z`, `\\z`, `\\p`, `\\h`, ...)
  is that letter, `\\8`/`\\9` are digits, a number above the group count is octal;
- a `{` that does not start a quantifier is a literal brace;
- text is UTF-16 code units: a character beyond U+FFFF is two (`code_units`);
- Python-only syntax is a syntax error, as it is for JavaScript: inline flags `(?i)`,
  `(?P<name>...)`, `(?P=name)`, comments `(?#...)`, atomic groups `(?>...)`, possessive
  quantifiers `a++`.

One difference remains: JavaScript forgets a group's capture at each new iteration of a
repetition around it (`(?:(a)|b)+\\1` on "ab" matches), `regex` keeps the last capture.
"""

from __future__ import annotations

import array
import re
import sys
from dataclasses import dataclass, field

#: JavaScript's \s (WhiteSpace and LineTerminator), as the inside of a character class
JS_SPACE = r"\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
#: what `.` matches without the `s` flag
JS_DOT = r"[^\n\r\u2028\u2029]"

_ESCAPE_AS_IS = set("dDwWfnrtv")
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_GROUP_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
#: characters that are literal inside a JavaScript class but special in some `regex` mode
_CLASS_ESCAPE = set("[&~|^")


_CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(32), 127)}


class JsSyntaxError(ValueError):
    """The pattern is not an ECMAScript regular expression (what `new RegExp` rejects)."""

    def __init__(self, message: str, position: int) -> None:
        # the message quotes the pattern: control characters in it are shown escaped, so the
        # error stays one line
        shown = message.translate(_CONTROL_ESCAPES)
        super().__init__(f"{shown} at position {position}")
        self.position = position


@dataclass
class Translation:
    #: the pattern in `regex` syntax (to compile with regex.ASCII | regex.V0)
    pattern: str
    #: spots where a reader used to Python or PCRE may expect another meaning
    notes: list[str] = field(default_factory=list)
    #: a quantified group holds a quantifier or alternatives: the shape of catastrophic
    #: backtracking (`(a+)+`, `(a|aa)*`); each is described
    backtracking: list[str] = field(default_factory=list)


@dataclass
class _Group:
    start: int
    has_quantifier: bool = False
    has_alternation: bool = False
    #: the capture number (None: not capturing) and name
    number: int | None = None
    name: str | None = None
    #: JavaScript does not let a lookbehind be quantified
    lookbehind: bool = False


def translate(source: str) -> Translation:
    """Translate a JavaScript pattern; raises JsSyntaxError where `new RegExp` would throw."""
    return _Translator(code_units(source)).run()


def code_units(text: str) -> str:
    """`text` as JavaScript strings hold it: UTF-16 code units, a character beyond U+FFFF
    being two (a surrogate pair), so `.` or `?` apply to one half as they do there."""
    if text.isascii() or max(text) <= "\uffff":
        return text
    data = text.encode("utf-16-le", "surrogatepass")
    units = array.array("H", data)
    if sys.byteorder == "big":
        units.byteswap()
    return "".join(map(chr, units))


class _Translator:
    def __init__(self, source: str) -> None:
        self.src = source
        self.i = 0
        self.out: list[str] = []
        self.result = Translation("")
        self.groups, self.names = _count_groups(source)
        self.stack: list[_Group] = [_Group(0)]
        #: what the last emitted piece was: "atom", "group", "quantified", or "" (nothing
        #: that a quantifier may follow)
        self.last = ""
        self.closed = _Group(0)
        #: capturing groups opened so far (their numbers are 1..opened), and their names
        self.opened = 0
        self.opened_names: set[str] = set()

    def fail(self, message: str, at: int | None = None) -> JsSyntaxError:
        return JsSyntaxError(message, self.i if at is None else at)

    def run(self) -> Translation:
        src = self.src
        while self.i < len(src):
            ch = src[self.i]
            if ch == "\\":
                self.escape()
            elif ch == "[":
                self.out.append(self.char_class())
                self.last = "atom"
            elif ch == "(":
                self.open_group()
            elif ch == ")":
                self.close_group()
            elif ch == "|":
                self.stack[-1].has_alternation = True
                self.emit("|", "")
            elif ch in "*+?":
                self.quantifier(ch, self.i + 1, unbounded=ch != "?")
            elif ch == "{":
                found = _QUANTIFIER.match(src, self.i)
                if found is None:
                    self.emit(r"\{", "atom")
                else:
                    low, comma, high = found.group(1), found.group(2), found.group(3)
                    if comma and high and int(high) < int(low):
                        raise self.fail("numbers out of order in a {} quantifier")
                    wide = bool(comma) and (not high or int(high) > 1)
                    self.quantifier(found.group(0), found.end(), unbounded=wide)
            elif ch == "}":
                self.emit(r"\}", "atom")
            elif ch == "]":
                self.emit(r"\]", "atom")
            elif ch == ".":
                self.emit(JS_DOT, "atom")
            elif ch == "$":
                # JavaScript: the end of the input, never before a final newline
                self.emit(r"\Z", "")
            elif ch == "^":
                self.emit("^", "")
            elif ch in " #":
                self.emit("\\" + ch, "atom")  # literal in every `regex` mode
            else:
                self.emit(ch, "atom")
        if len(self.stack) > 1:
            raise self.fail("unterminated group", self.stack[-1].start)
        self.result.pattern = "".join(self.out)
        return self.result

    def emit(self, text: str, last: str, advance: int = 1) -> None:
        self.out.append(text)
        self.last = last
        self.i += advance

    # ---------------------------------------------------------------- groups and quantifiers

    def open_group(self) -> None:
        src, i = self.src, self.i
        if not src.startswith("(?", i):
            self.opened += 1
            self.stack.append(_Group(i, number=self.opened))
            self.emit("(", "", 1)
            return
        for prefix in ("(?:", "(?=", "(?!", "(?<=", "(?<!"):
            if src.startswith(prefix, i):
                self.stack.append(_Group(i, lookbehind=prefix.startswith("(?<")))
                self.emit(prefix, "", len(prefix))
                return
        if src.startswith("(?<", i):
            name = _GROUP_NAME.match(src, i + 3)
            if name is None or not src.startswith(">", name.end()):
                raise self.fail("invalid capture group name")
            if name.group(0) in self.opened_names:
                raise self.fail(f"duplicate capture group name {name.group(0)}")
            self.opened += 1
            self.opened_names.add(name.group(0))
            self.stack.append(_Group(i, number=self.opened, name=name.group(0)))
            self.emit(f"(?<{name.group(0)}>", "", name.end() + 1 - i)
            return
        shown = src[i : i + 4]
        raise self.fail(
            f"`{shown}` is not ECMAScript syntax (inline flags, (?P<name>...), (?P=name), "
            "comments and atomic groups are Python/PCRE only)"
        )

    def close_group(self) -> None:
        if len(self.stack) == 1:
            raise self.fail("unmatched ')'")
        group = self.stack.pop()
        self.stack[-1].has_quantifier |= group.has_quantifier
        # a quantified lookbehind is a syntax error in JavaScript
        self.emit(")", "" if group.lookbehind else "group")
        self.closed = group

    def quantifier(self, text: str, end: int, *, unbounded: bool) -> None:
        if self.last in ("", "quantified"):
            raise self.fail("nothing to repeat")
        lazy = end < len(self.src) and self.src[end] == "?"
        if self.last == "group":
            group = self.closed
            if unbounded and (group.has_quantifier or group.has_alternation):
                inner = self.src[group.start : self.i]
                what = "a quantifier" if group.has_quantifier else "alternatives"
                self.result.backtracking.append(
                    f"`{inner}{text}` repeats a group that holds {what}"
                )
        if unbounded:
            self.stack[-1].has_quantifier = True
        self.out.append(text + ("?" if lazy else ""))
        self.i = end + (1 if lazy else 0)
        self.last = "quantified"

    # ---------------------------------------------------------------- escapes

    def escape(self) -> None:
        src, i = self.src, self.i
        if i + 1 >= len(src):
            raise self.fail("\\ at end of pattern")
        ch = src[i + 1]
        if ch in _ESCAPE_AS_IS:
            self.emit("\\" + ch, "atom", 2)
        elif ch in "bB":
            self.emit("\\" + ch, "", 2)
        elif ch == "s":
            self.emit(f"[{JS_SPACE}]", "atom", 2)
        elif ch == "S":
            self.emit(f"[^{JS_SPACE}]", "atom", 2)
        elif ch.isdigit() and ch.isascii():
            self.decimal_escape()
        elif ch == "k" and self.names:
            name = _GROUP_NAME.match(src, i + 3) if src.startswith("<", i + 2) else None
            if name is None or not src.startswith(">", name.end()):
                raise self.fail("invalid named reference")
            if name.group(0) not in self.names:
                raise self.fail(f"invalid named capture referenced: {name.group(0)}")
            self.emit(self.backreference(name.group(0)), "atom", name.end() + 1 - i)
        else:
            text, length = self.literal_escape(in_class=False)
            self.emit(text, "atom", length)

    def decimal_escape(self) -> None:
        src, i = self.src, self.i
        digits = re.match(r"\d+", src[i + 1 :])
        assert digits is not None
        number = digits.group(0)
        if number != "0" and not number.startswith("0") and int(number) <= self.groups:
            self.emit(self.backreference(int(number)), "atom", 1 + len(number))
            return
        text, length = self.octal_or_digit(i + 1)
        self.emit(text, "atom", length)

    def backreference(self, group: int | str) -> str:
        """JavaScript: a reference to a group that has not captured (later in the pattern,
        still open, or not taken) matches the empty string; `regex` would fail there."""
        if isinstance(group, int):
            opened = group <= self.opened
            test, ref = str(group), f"\\g<{group}>"
        else:
            opened = group in self.opened_names
            test, ref = group, f"(?P={group})"
        if not opened or any(g.number == group or g.name == group for g in self.stack):
            return "(?:)"
        return f"(?({test}){ref})"

    def octal_or_digit(self, at: int) -> tuple[str, int]:
        """Annex B: `\\0`-`\\377` are octal escapes, `\\8` and `\\9` the digits themselves."""
        src = self.src
        if src[at] in "89":
            return src[at], 2
        octal = re.match(r"[0-3][0-7]{0,2}|[4-7][0-7]?", src[at:])
        assert octal is not None
        code = int(octal.group(0), 8)
        if octal.group(0) != "0":
            self.result.notes.append(
                f"`\\{octal.group(0)}` is an octal escape (character {code}), not a back reference"
            )
        return f"\\x{code:02x}", 1 + len(octal.group(0))

    def literal_escape(self, *, in_class: bool) -> tuple[str, int]:
        """An escape that stands for one character (control, hex, unicode, identity)."""
        src, i = self.src, self.i
        ch = src[i + 1]
        if ch == "c":
            letter = src[i + 2 : i + 3]
            if letter.isascii() and letter.isalpha():
                return f"\\x{ord(letter) % 32:02x}", 3
            if in_class and (letter.isdigit() or letter == "_") and letter.isascii():
                return f"\\x{ord(letter) % 32:02x}", 3
            return r"\\", 1  # Annex B: the backslash is literal, `c` follows as itself
        if ch == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", src[i + 2 : i + 4]):
            return src[i : i + 4], 4
        if ch == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", src[i + 2 : i + 6]):
            return src[i : i + 6], 6
        if ch.isascii() and ch.isalpha():
            if ch not in "xuck":
                self.result.notes.append(
                    f"`\\{ch}` is not an ECMAScript escape: JavaScript matches the letter {ch}"
                )
            return ch, 2
        return _literal(ch), 2

    # ---------------------------------------------------------------- character classes

    def char_class(self) -> str:
        src = self.src
        start = self.i
        self.i += 1
        negated = src.startswith("^", self.i)
        if negated:
            self.i += 1
        atoms: list[tuple[str, str]] = []  # (kind, text): kind "char", "set" or "dash"
        not_space = False
        while True:
            if self.i >= len(src):
                raise self.fail("unterminated character class", start)
            ch = src[self.i]
            if ch == "]":
                self.i += 1
                break
            if ch == "-":
                atoms.append(("dash", "-"))
                self.i += 1
            elif ch == "\\":
                if self.i + 1 >= len(src):
                    raise self.fail("\\ at end of pattern")
                esc = src[self.i + 1]
                if esc in "dDwW":
                    atoms.append(("set", "\\" + esc))
                    self.i += 2
                elif esc == "s":
                    atoms.append(("set", JS_SPACE))
                    self.i += 2
                elif esc == "S":
                    atoms.append(("set", ""))
                    not_space = True
                    self.i += 2
                elif esc == "b":
                    atoms.append(("char", r"\x08"))
                    self.i += 2
                elif esc in "fnrtv":
                    atoms.append(("char", "\\" + esc))
                    self.i += 2
                elif esc == "-":
                    atoms.append(("char", r"\-"))
                    self.i += 2
                elif esc == "k" and self.names:
                    raise self.fail("invalid escape \\k in a class of a pattern with named groups")
                elif esc.isdigit() and esc.isascii():
                    text, length = self.octal_or_digit(self.i + 1)
                    atoms.append(("char", text))
                    self.i += length
                else:
                    text, length = self.literal_escape(in_class=True)
                    atoms.append(("char", text))
                    self.i += length
            else:
                atoms.append(("char", "\\" + ch if ch in _CLASS_ESCAPE else ch))
                self.i += 1
        body = _class_body(atoms)
        if not atoms:
            return "(?s:.)" if negated else "(?!)"
        if not not_space:
            if negated and any(kind == "set" for kind, _ in atoms):
                # `regex` matches everything with a negated class whose escapes cover every
                # character (`[^\\w\\W]`): the complement is spelt as a lookahead instead
                return f"(?:(?![{body}])(?s:.))"
            return f"[{'^' if negated else ''}{body}]"
        # \S inside a class: a union the `regex` V0 syntax has no set operation for
        if negated:
            return f"(?:(?![{body}])[{JS_SPACE}])" if body else f"[{JS_SPACE}]"
        return f"(?:[{body}]|[^{JS_SPACE}])" if body else f"[^{JS_SPACE}]"


def _class_body(atoms: list[tuple[str, str]]) -> str:
    """Join class atoms as JavaScript parses them: an atom, then `-` and another atom, is a
    range (a `-` is itself an atom where it starts one); a range with a class escape such as
    `\\d` at either end is three literal atoms (Annex B)."""
    parts: list[str] = []
    n = 0
    while n < len(atoms):
        kind, text = atoms[n]
        first = r"\-" if kind == "dash" else text
        if n + 2 < len(atoms) and atoms[n + 1][0] == "dash":
            last_kind, last = atoms[n + 2]
            last = r"\-" if last_kind == "dash" else last
            if kind == "set" or last_kind == "set":
                parts.append(f"{first}\\-{last}")
            else:
                parts.append(f"{first}-{last}")
            n += 3
            continue
        parts.append(first)
        n += 1
    return "".join(parts)


def _literal(ch: str) -> str:
    """One character as a literal in any `regex` context."""
    if ch.isascii() and not ch.isalnum():
        return "\\" + ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _count_groups(source: str) -> tuple[int, set[str]]:
    """Capturing groups and group names of the whole pattern (JavaScript numbers back
    references against all of them, later groups included)."""
    count = 0
    names: set[str] = set()
    i = 0
    in_class = False
    while i < len(source):
        ch = source[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if source.startswith("]", i + 1) or source.startswith("^]", i + 1):
                i += 2 if source[i + 1] == "]" else 3
                in_class = False
                continue
        elif ch == "(":
            if not source.startswith("(?", i):
                count += 1
            elif source.startswith("(?<", i) and source[i + 3 : i + 4] not in ("=", "!"):
                count += 1
                name = _GROUP_NAME.match(source, i + 3)
                if name is not None:
                    names.add(name.group(0))
        i += 1
    return count, names
