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
		if !opts.ready {
			if line := versionMismatch(answer.body, version); line != "" {
				say(stderr, line)
			}
		}
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

// versionMismatch is the one line saying the daemon's version (its /healthz answer) is not
// this client's, or "" when they are the same or this binary was built without a version.
// cloudrunner/commands/health.py says the same words.
func versionMismatch(body []byte, mine string) string {
	if mine == "unknown" {
		return ""
	}
	var data map[string]any
	if json.Unmarshal(body, &data) != nil {
		data = nil
	}
	advice := "use one version of both (cloudrunner --version, cloudrunner-hook --version)"
	daemon, ok := plainWord(data["version"])
	if !ok {
		return fmt.Sprintf("cloudrunner: the daemon does not say its version (it is older "+
			"than this client, %s); %s", mine, advice)
	}
	if daemon == mine {
		return ""
	}
	commit, ok := plainWord(data["commit"])
	if !ok {
		commit = "unknown"
	}
	return fmt.Sprintf("cloudrunner: the daemon is version %s (commit %s) and this client %s; %s",
		daemon, commit, mine, advice)
}

// plainWord is a version or commit the daemon stated that may be repeated on one line:
// 1 to 64 ASCII letters, digits and . + - _.
func plainWord(value any) (string, bool) {
	s, ok := value.(string)
	if !ok || len(s) == 0 || len(s) > 64 {
		return "", false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
			c == '.' || c == '+' || c == '-' || c == '_') {
			return "", false
		}
	}
	return s, true
}
