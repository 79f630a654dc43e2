package cli

import (
	"math"
	"strconv"
	"strings"
)

// Hook is `hook EVENT`'s command line: `cloudrunner hook`'s flags.
type Hook struct {
	Event     string
	Socket    string
	URL       string
	TokenFile string
	ExitCode  bool
	Fallback  string // "", "none" or "in-process"
	FailFlag  string // "", "closed" or "open"
	InProcess bool
	Config    string
	Timeout   float64 // seconds
}

var hookSpec = spec{
	values:     []string{"--socket", "--url", "--token-file", "--fallback", "--config", "--timeout"},
	switches:   []string{"--exit-code", "--fail-closed", "--fail-open", "--in-process"},
	exclusive:  [][2]string{{"--socket", "--url"}, {"--fail-closed", "--fail-open"}},
	positional: "EVENT",
}

// parseHook reads the words after `hook`; help is true for --help.
func parseHook(words []string) (opts *Hook, help bool, err error) {
	opts = &Hook{Timeout: 600}
	event, help, err := scan(words, hookSpec, func(name, value string) error {
		switch name {
		case "--socket":
			opts.Socket = value
		case "--url":
			opts.URL = value
		case "--token-file":
			opts.TokenFile = value
		case "--config":
			opts.Config = value
		case "--fallback":
			if value != "none" && value != "in-process" {
				return usagef("argument --fallback: invalid choice: %s (choose from 'none', 'in-process')",
					pyRepr(value))
			}
			opts.Fallback = value
		case "--timeout":
			return seconds(value, &opts.Timeout)
		case "--exit-code":
			opts.ExitCode = true
		case "--fail-closed":
			opts.FailFlag = "closed"
		case "--fail-open":
			opts.FailFlag = "open"
		case "--in-process":
			opts.InProcess = true
		}
		return nil
	})
	if err != nil || help {
		return nil, help, err
	}
	opts.Event = event
	return opts, false, nil
}

// seconds reads --timeout: a number of seconds above 0 (and below 1e9).
func seconds(value string, into *float64) error {
	n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if err != nil || math.IsNaN(n) || !(n > 0 && n < 1e9) {
		return usagef("argument --timeout: %s is not a number of seconds above 0", pyRepr(value))
	}
	*into = n
	return nil
}
