package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
)

// health is `cloudrunner health [--ready]`: exit 0 when the daemon is healthy (or ready),
// else 1 with the reason on stderr.
func health(opts *options, stdout, stderr io.Writer) int {
	ep, err := endpointFrom(opts.socket, opts.url, opts.tokenFile)
	if err != nil {
		return usageFail(stderr, err.Error())
	}
	path := "/healthz"
	state := "healthy"
	if opts.ready {
		path, state = "/readyz", "ready"
	}
	answer, err := request(ep, "GET", path, nil, opts.timeout,
		time.Duration(opts.timeout*float64(time.Second)))
	if err != nil {
		say(stderr, "cloudrunner: unhealthy: "+err.Error())
		return 1
	}
	text := decodeReplace(answer.body)
	if answer.status == 200 {
		fmt.Fprintln(stdout, trimPySpace(text))
		return 0
	}
	reason := text
	var data map[string]any
	if json.Unmarshal(answer.body, &data) == nil {
		if value, ok := data["reason"]; ok && value != nil && value != "" && value != false {
			if s, ok := value.(string); ok {
				reason = s
			} else {
				reason = string(compactJSON(value))
			}
		}
	}
	say(stderr, fmt.Sprintf("cloudrunner: not %s (HTTP %d): %s", state, answer.status,
		firstRunes(trimPySpace(reason), 300)))
	return 1
}

// trimPySpace is Python's str.strip(): whitespace at both ends.
func trimPySpace(s string) string { return strings.TrimFunc(s, unicode.IsSpace) }
