"""Matcher semantics, case by case: (pattern, subject, what JavaScript's `new RegExp(pattern)
.test(subject)` gives). None: `new RegExp` throws (the matcher is invalid).

Every row was checked against Node.js (`tests/unit/protocol/test_js_regex.py` says how to
check it again)."""

from __future__ import annotations

ROWS: list[tuple[str, str, bool | None]] = [
    # $ only at the very end (Python's $ also matches before a final newline)
    ("ab$", "ab", True),
    ("ab$", "ab\n", False),
    ("^ab$", "xab", False),
    ("^b", "a\nb", False),
    # [^] is any character, [] none
    ("a[^]b", "a\nb", True),
    ("[]", "a", False),
    ("a[]?b", "ab", True),
    # . : not the four line terminators
    ("a.b", "a\nb", False),
    ("a.b", "a\rb", False),
    ("a.b", "a\u2028b", False),
    ("a.b", "a\u2029b", False),
    ("a.b", "a\x85b", True),
    # \d \w \b are ASCII
    (r"\d", "\u0663", False),
    (r"\d", "7", True),
    (r"\w", "\u00e9", False),
    (r"\w", "_", True),
    (r"\bcaf", "\u00e9caf", True),
    (r"\W", "\u00e9", True),
    # \s is JavaScript's white space set
    (r"\s", "\u00a0", True),
    (r"\s", "\ufeff", True),
    (r"\s", "\u3000", True),
    (r"\s", "\u2028", True),
    (r"\s", "\x1c", False),
    (r"\s", "\x85", False),
    (r"\S", "\x85", True),
    (r"[\S]", " ", False),
    (r"[\S]", "a", True),
    (r"[^\S]", "\u00a0", True),
    (r"[^\S]", "a", False),
    (r"[^\S ]", " ", False),
    (r"[^\S ]", "\t", True),
    (r"[a\S]", " ", False),
    (r"[\s]", "\ufeff", True),
    # named groups and their references
    (r"(?<word>ab)\k<word>", "abab", True),
    (r"(?<word>ab)\k<word>", "abba", False),
    (r"\k<x>", "k<x>", True),
    (r"(?P<word>ab)", "ab", None),
    (r"(?P<w>a)(?P=w)", "aa", None),
    # lookbehind, variable length (Python's re allows only fixed width)
    (r"(?<=a+)b", "aaab", True),
    (r"(?<!x)b", "xb", False),
    # Python/PCRE-only syntax is a syntax error
    ("(?i)a", "A", None),
    ("(?i:a)b", "Ab", None),
    ("(?#note)a", "a", None),
    ("(?>a)", "a", None),
    ("a++", "aa", None),
    ("a*+", "aa", None),
    ("a{2}+", "aa", None),
    ("*a", "a", None),
    ("a)", "a", None),
    ("(a", "a", None),
    ("[a", "a", None),
    ("a{3,2}", "aaa", None),
    ("a\\", "a", None),
    # escapes JavaScript does not define are the letter itself
    (r"\Z", "Z", True),
    (r"a\Z", "a", False),
    (r"\A", "A", True),
    (r"\z", "z", True),
    (r"\p{L}", "p{L}", True),
    (r"\p{L}", "x", False),
    (r"\h", "h", True),
    (r"\e", "e", True),
    (r"\a", "a", True),
    (r"\a", "\x07", False),
    (r"\g", "g", True),
    (r"\/", "/", True),
    # numbers: back references up to the group count, octal (or digits) above
    (r"(a)\1", "aa", True),
    (r"\1", "\x01", True),
    (r"\8", "8", True),
    (r"a\0", "a\x00", True),
    (r"\101", "A", True),
    (r"(a)\10", "a\x08", True),
    # control, hex and unicode escapes
    (r"\cJ", "\n", True),
    (r"\c1", "\\c1", True),
    (r"\x41", "A", True),
    (r"\xZ1", "xZ1", True),
    (r"\u0041", "A", True),
    (r"\u{41}", "u" * 41, True),
    # braces that are not a quantifier are literal
    ("a{,2}", "a{,2}", True),
    ("a{2", "a{2", True),
    ("{", "{", True),
    ("a}", "a}", True),
    ("]", "]", True),
    ("a{2}", "aa", True),
    ("a{2,}?", "aa", True),
    # classes
    (r"[\d-z]", "-", True),
    (r"[a-c]", "b", True),
    (r"[\b]", "\x08", True),
    (r"[[]", "[", True),
    (r"[a&&b]", "&", True),
    (r"[|~]", "~", True),
    (r"[\-]", "-", True),
    (r"[\w-]", "-", True),
    (r"[z-a]", "a", None),
    # characters literal in JavaScript, special in some Python modes
    ("a b", "a b", True),
    ("a#b", "a#b", True),
    # ordinary matchers
    ("Shell|Read", "Read", True),
    ("^MCP:", "MCP:x", True),
    ("rm\\s+-rf", "rm  -rf /", True),
]

ROWS += [
    # a reference to a group that has not captured matches the empty string
    (r"\1(a)", "a", True),
    (r"(a)|\1b", "b", True),
    (r"(a\1)", "a", True),
    (r"\k<n>(?<n>a)", "a", True),
    (r"(?<=a){2}", "aa", None),
    (r"(?=a)*a", "a", True),
]

ROWS += [
    # classes as JavaScript parses them: a leading `-` starts a range, escapes end none
    (r"[--\v]", "-", None),
    (r"[--/]", ".", True),
    (r"[^\d\D]", "p", False),
    (r"[^\w\W]", " ", False),
    (r"[^\W\d]", "p", True),
    # with named groups, \k must name one, in a class too; names are unique
    (r"(?<a>x)[\k]", "k", None),
    (r"(?<n>a)|(?<n>b)", "b", None),
    # UTF-16 code units: a character beyond U+FFFF is two
    ("^.$", "\U0001f600", False),
    ("^..$", "\U0001f600", True),
    ("\U0001f600?", "\ud83d", True),
    ("[\U0001f600]", "\ude00", True),
]

#: where cloudrunner knowingly differs: (pattern, subject, JavaScript's verdict). JavaScript
#: forgets a group's capture at each new iteration of the repetition around it; the `regex`
#: engine keeps the last one (README: "Hostile input: matchers and payloads").
KNOWN_DIFFERENCES: list[tuple[str, str, bool]] = [
    (r"^(?:(a)|b)+\1$", "ab", True),
    (r"^(?:(a)|b)+\1$", "aba", False),
]
