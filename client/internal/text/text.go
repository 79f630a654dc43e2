// Package text says things the way the Python client says them: Python's repr, its
// strerror, its str.strip, its f"{x:g}", json.dumps; and the one-line stderr message.
package text

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// PyRepr quotes a string the way Python's repr() does (the Python client's messages use
// it): single quotes, or double ones when the text holds a single quote and no double one;
// backslash escapes for the quote, \\, \t, \n, \r and what is not printable; a byte that is
// not UTF-8 as Python's surrogate escape of it (\udcXX).
func PyRepr(s string) string {
	quote := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		quote = '"'
	}
	var sb strings.Builder
	sb.WriteByte(quote)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&sb, "\\udc%02x", s[i])
		case r == rune(quote) || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\t':
			sb.WriteString("\\t")
		case r == '\n':
			sb.WriteString("\\n")
		case r == '\r':
			sb.WriteString("\\r")
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&sb, "\\x%02x", r)
		case r > 0x7f && !unicode.IsPrint(r):
			if r < 0x10000 {
				fmt.Fprintf(&sb, "\\u%04x", r)
			} else {
				fmt.Fprintf(&sb, "\\U%08x", r)
			}
		default:
			sb.WriteRune(r)
		}
		i += size
	}
	sb.WriteByte(quote)
	return sb.String()
}

// CompactJSON encodes a value without HTML escaping, keys sorted (maps), no newline:
// what json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True) gives.
func CompactJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("{}")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// OSText is an error's text in lower case without an errno number, as Python's
// strerror gives it with its first letter lowered.
func OSText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return lowerFirst(errno.Error())
	}
	return lowerFirst(err.Error())
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	r, size := utf8.DecodeRuneInString(s)
	return strings.ToLower(string(r)) + s[size:]
}

// DecodeReplace is Python's bytes.decode(errors="replace"): one U+FFFD per bad byte.
func DecodeReplace(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		sb.WriteRune(r)
		b = b[size:]
	}
	return sb.String()
}

// FirstRunes is s[:n] in characters, like Python slicing a str.
func FirstRunes(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}

// FormatSeconds is Python's f"{value:g}".
func FormatSeconds(value float64) string {
	return fmt.Sprintf("%.6g", value)
}

// TrimPySpace is Python's str.strip(): whitespace at both ends.
func TrimPySpace(s string) string { return strings.TrimFunc(s, unicode.IsSpace) }

// Say writes one line to stderr.
func Say(stderr io.Writer, line string) { fmt.Fprintln(stderr, line) }
