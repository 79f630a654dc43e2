// Package health is `cloudrunner-hook health [--ready]`: whether the daemon answers healthy
// (or ready), and a line when its version is not this client's.
package health

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"cloudrunner.invalid/cloudrunner-hook/internal/cli"
	"cloudrunner.invalid/cloudrunner-hook/internal/text"
	"cloudrunner.invalid/cloudrunner-hook/internal/wire"
)

// Run is `cloudrunner health [--ready]`: exit 0 when the daemon is healthy (or ready), else
// 1 with the reason on stderr; 64 with one line for a usage error. version is this client's.
func Run(opts *cli.Health, version string, stdout, stderr io.Writer) int {
	ep, err := wire.EndpointFrom(opts.Socket, opts.URL, opts.TokenFile)
	if err != nil {
		return cli.Fail(stderr, err.Error())
	}
	path := "/healthz"
	state := "healthy"
	if opts.Ready {
		path, state = "/readyz", "ready"
	}
	answer, err := wire.Request(ep, "GET", path, nil, opts.Timeout,
		time.Duration(opts.Timeout*float64(time.Second)))
	if err != nil {
		text.Say(stderr, "cloudrunner: unhealthy: "+err.Error())
		return 1
	}
	body := text.DecodeReplace(answer.Body)
	if answer.Status == 200 {
		fmt.Fprintln(stdout, text.TrimPySpace(body))
		if !opts.Ready {
			if line := VersionMismatch(answer.Body, version); line != "" {
				text.Say(stderr, line)
			}
		}
		return 0
	}
	reason := body
	var data map[string]any
	if json.Unmarshal(answer.Body, &data) == nil {
		if value, ok := data["reason"]; ok && value != nil && value != "" && value != false {
			if s, ok := value.(string); ok {
				reason = s
			} else {
				reason = string(text.CompactJSON(value))
			}
		}
	}
	text.Say(stderr, fmt.Sprintf("cloudrunner: not %s (HTTP %d): %s", state, answer.Status,
		text.FirstRunes(text.TrimPySpace(reason), 300)))
	return 1
}

// VersionMismatch is the one line saying the daemon's version (its /healthz answer) is not
// this client's, or "" when they are the same or this binary was built without a version.
// cloudrunner/commands/health.py says the same words.
func VersionMismatch(body []byte, mine string) string {
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
