package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"unicode/utf8"
)

// pyRepr quotes a string the way Python's repr() does for the strings people type
// (the Python client's messages use it): single quotes, or double quotes when the text
// holds a single quote and no double one. Other text falls back to escaped double quotes.
func pyRepr(s string) string {
	plain := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\\' || r == utf8.RuneError {
			plain = false
			break
		}
	}
	switch {
	case plain && !strings.Contains(s, "'"):
		return "'" + s + "'"
	case plain && !strings.Contains(s, `"`):
		return `"` + s + `"`
	}
	out, _ := json.Marshal(s)
	return string(out)
}

// compactJSON encodes a value without HTML escaping, keys sorted (maps), no newline:
// what json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True) gives.
func compactJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("{}")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// osText is an error's text in lower case without an errno number, as Python's
// strerror gives it with its first letter lowered.
func osText(err error) string {
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

// decodeReplace is Python's bytes.decode(errors="replace"): one U+FFFD per bad byte.
func decodeReplace(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		sb.WriteRune(r)
		b = b[size:]
	}
	return sb.String()
}

// firstRunes is s[:n] in characters, like Python slicing a str.
func firstRunes(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}

// formatSeconds is Python's f"{value:g}".
func formatSeconds(value float64) string {
	return fmt.Sprintf("%.6g", value)
}
