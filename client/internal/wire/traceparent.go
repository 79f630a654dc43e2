package wire

import (
	"bytes"
	"os"
	"strings"
)

// withTraceparent adds a `Traceparent` header to a request head (as net/http's
// Request.Write would place it, after the other headers, before the blank line) when the
// agent's environment has TRACEPARENT in the W3C shape, VERSION-TRACEID-PARENTID-FLAGS in
// lowercase hex: the agent's trace then continues through the hooks. Another value is not
// sent (the daemon checks the rest). The Python client does the same
// (cloudrunner/client: traceparent()).
func withTraceparent(head []byte) []byte {
	value := strings.Trim(os.Getenv("TRACEPARENT"), " \t")
	if !traceparentShape(value) || !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		return head
	}
	out := make([]byte, 0, len(head)+len(value)+15)
	out = append(out, head[:len(head)-2]...)
	out = append(out, "Traceparent: "+value+"\r\n\r\n"...)
	return out
}

// traceparentShape: visible ASCII, at most 512 bytes, the four first fields of the right
// widths in lowercase hex (version ff refused; version 00 has exactly four fields).
func traceparentShape(value string) bool {
	if value == "" || len(value) > 512 {
		return false
	}
	for i := 0; i < len(value); i++ {
		if value[i] < '!' || value[i] > '~' {
			return false
		}
	}
	fields := strings.Split(value, "-")
	if len(fields) < 4 || fields[0] == "ff" || (fields[0] == "00" && len(fields) != 4) {
		return false
	}
	for i, width := range []int{2, 32, 16, 2} {
		if len(fields[i]) != width || strings.Trim(fields[i], "0123456789abcdef") != "" {
			return false
		}
	}
	return true
}
