"""systemd's reading of a unit file, written from its manuals (systemd.syntax(7),
systemd.service(5), systemd.exec(5), systemd.unit(5)) for the settings `cloudrunner vm`
writes, so a test can check that what systemd reads back is exactly what was meant:

- lines: `[Section]`, `Key=value` (blanks around both stripped), comments starting with `#`
  or `;`, a line ending in an odd number of backslashes continued on the next one;
- specifiers: `%%` is `%`; any other `%x` is a specifier (reported, since the writer never
  means one);
- `ExecStart=` and `Environment=` are split into words: double or single quotes, C escapes
  (`\\n`, `\\t`, `\\\\`, `\\"`, `\\xNN`, `\\NNN`, `\\uNNNN`, ...) inside and outside quotes;
  in `ExecStart=` then `$$` is `$` and any other `$` is a variable (reported); in
  `Environment=` `$` is itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
              "\\": "\\", '"': '"', "'": "'", "s": " "}  # fmt: skip


class UnitSyntaxError(ValueError):
    """A unit file systemd would not read as written."""


@dataclass
class Unit:
    #: "Section.Key" -> every value, in order
    keys: dict[str, list[str]] = field(default_factory=dict)

    def one(self, key: str) -> str:
        values = self.keys.get(key, [])
        if len(values) != 1:
            raise UnitSyntaxError(f"{key} is set {len(values)} times")
        return values[0]


def parse_unit(text: str) -> Unit:
    unit = Unit()
    section = ""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        while _continued(line) and i < len(lines):
            line = line[:-1] + " " + lines[i]
            i += 1
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]"):
                raise UnitSyntaxError(f"bad section line {line!r}")
            section = stripped[1:-1]
            continue
        key, eq, value = stripped.partition("=")
        if not eq:
            raise UnitSyntaxError(f"a line that is not Key=value: {line!r}")
        unit.keys.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return unit


def _continued(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def specifiers(text: str) -> str:
    """`%%` -> `%`; any other specifier is an error (the writer never means one)."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "%":
            if text[i + 1 : i + 2] != "%":
                raise UnitSyntaxError(f"a specifier %{text[i + 1 : i + 2]} in {text!r}")
            out.append("%")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def words(value: str) -> list[str]:
    """systemd's extract_first_word with quotes and C escapes, word after word."""
    out: list[str] = []
    i = 0
    n = len(value)
    while True:
        while i < n and value[i] in " \t\n":
            i += 1
        if i >= n:
            return out
        word: list[str] = []
        quote = ""
        while i < n:
            c = value[i]
            if not quote and c in " \t\n":
                break
            if c == "\\":
                ch, i = _escape(value, i + 1)
                word.append(ch)
                continue
            if quote:
                if c == quote:
                    quote = ""
                else:
                    word.append(c)
            elif c in "\"'":
                quote = c
            else:
                word.append(c)
            i += 1
        if quote:
            raise UnitSyntaxError(f"an unterminated quote in {value!r}")
        out.append("".join(word))


def _escape(value: str, i: int) -> tuple[str, int]:
    if i >= len(value):
        raise UnitSyntaxError(f"a backslash at the end of {value!r}")
    c = value[i]
    if c in _C_ESCAPES:
        return _C_ESCAPES[c], i + 1
    if c == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", value[i + 1 : i + 3]):
        return chr(int(value[i + 1 : i + 3], 16)), i + 3
    if c in "01234567" and re.fullmatch(r"[0-7]{3}", value[i : i + 3]):
        return chr(int(value[i : i + 3], 8)), i + 3
    if c == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", value[i + 1 : i + 5]):
        return chr(int(value[i + 1 : i + 5], 16)), i + 5
    raise UnitSyntaxError(f"an unknown escape \\{c} in {value!r}")


def exec_argv(value: str) -> list[str]:
    """ExecStart=: words, then specifiers, then `$$` -> `$` (another `$` is a variable)."""
    argv = []
    for word in words(value):
        text = specifiers(word)
        if "$" in text.replace("$$", ""):
            raise UnitSyntaxError(f"a variable in the word {word!r}")
        argv.append(text.replace("$$", "$"))
    return argv


def environment(value: str) -> dict[str, str]:
    """Environment=: words, then specifiers; `$` is itself."""
    out = {}
    for word in words(value):
        name, eq, val = specifiers(word).partition("=")
        if not eq:
            raise UnitSyntaxError(f"an assignment without `=`: {word!r}")
        out[name] = val
    return out
