package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// options are `cloudrunner-hook`'s flags: `cloudrunner hook`'s, parsed with the same
// rules and the same messages as Python's argparse gives for them.
type options struct {
	command   string // "hook" or "health"
	event     string
	socket    string
	url       string
	tokenFile string
	exitCode  bool
	fallback  string
	failFlag  string // "", "closed" or "open"
	inProcess bool
	config    string
	timeout   float64
	ready     bool
	help      bool
	version   bool // --version: print the version and commit
}

type usageError struct{ message string }

func (e usageError) Error() string { return e.message }

// looksNegative is argparse's test for a word that is a negative number, not a flag
// (`^-\d+$|^-\d*\.\d+$`), without the regexp package's start-up cost.
func looksNegative(word string) bool {
	if len(word) < 2 || word[0] != '-' {
		return false
	}
	digits, dot := 0, -1
	for i := 1; i < len(word); i++ {
		switch c := word[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && dot < 0:
			dot = i
		default:
			return false
		}
	}
	if dot < 0 {
		return digits > 0
	}
	return dot < len(word)-1 // digits after the dot
}

// parseArgs reads `hook EVENT [flags]` or `health [flags]` (the words after the program).
func parseArgs(words []string) (*options, error) {
	if len(words) == 0 {
		return nil, usageError{"the following arguments are required: command"}
	}
	if words[0] == "--help" || words[0] == "-h" {
		return &options{help: true}, nil
	}
	if words[0] == "--version" {
		return &options{version: true}, nil
	}
	opts := &options{command: words[0], timeout: 600}
	valueFlags := map[string]bool{"--socket": true, "--url": true, "--token-file": true}
	boolFlags := map[string]bool{"--help": true, "-h": true}
	switch words[0] {
	case "hook":
		for _, name := range []string{"--fallback", "--config", "--timeout"} {
			valueFlags[name] = true
		}
		for _, name := range []string{"--exit-code", "--fail-closed", "--fail-open", "--in-process"} {
			boolFlags[name] = true
		}
	case "health":
		opts.timeout = 5
		valueFlags["--timeout"] = true
		boolFlags["--ready"] = true
	default:
		return nil, usageError{fmt.Sprintf(
			"argument command: invalid choice: %s (choose from 'hook', 'health')", pyRepr(words[0]))}
	}
	// the words in order: 'A' a positional, 'S' the first "--" (after which every word
	// is positional), 'O' a known flag (with its value), 'U' an unknown flag
	type item struct {
		word string
		kind byte
	}
	var items []item
	separated := false
	seen := map[string]bool{}
	exclusive := func(name string, group []string) error {
		if name != group[0] && name != group[1] {
			return nil
		}
		for _, other := range group {
			if other != name && seen[other] {
				return usageError{fmt.Sprintf("argument %s: not allowed with argument %s", name, other)}
			}
		}
		return nil
	}
	for i := 1; i < len(words); i++ {
		word := words[i]
		if separated || !strings.HasPrefix(word, "-") || word == "-" || looksNegative(word) {
			items = append(items, item{word, 'A'})
			continue
		}
		if word == "--" {
			items = append(items, item{word, 'S'})
			separated = true
			continue
		}
		name, inline, hasInline := strings.Cut(word, "=")
		if valueFlags[name] || boolFlags[name] {
			items = append(items, item{word, 'O'})
		}
		switch {
		case valueFlags[name]:
			value := inline
			if !hasInline {
				if i+1 >= len(words) || (strings.HasPrefix(words[i+1], "-") && words[i+1] != "-" &&
					!looksNegative(words[i+1])) {
					return nil, usageError{fmt.Sprintf("argument %s: expected one argument", name)}
				}
				i++
				value = words[i]
			}
			seen[name] = true
			if err := exclusive(name, []string{"--socket", "--url"}); err != nil {
				return nil, err
			}
			if err := opts.set(name, value); err != nil {
				return nil, err
			}
		case boolFlags[name]:
			if hasInline {
				return nil, usageError{fmt.Sprintf("argument %s: ignored explicit argument %s",
					name, pyRepr(inline))}
			}
			seen[name] = true
			if err := exclusive(name, []string{"--fail-closed", "--fail-open"}); err != nil {
				return nil, err
			}
			switch name {
			case "--help", "-h":
				opts.help = true
				return opts, nil
			case "--exit-code":
				opts.exitCode = true
			case "--fail-closed":
				opts.failFlag = "closed"
			case "--fail-open":
				opts.failFlag = "open"
			case "--in-process":
				opts.inProcess = true
			case "--ready":
				opts.ready = true
			}
		default:
			items = append(items, item{word, 'U'})
		}
	}
	// argparse: EVENT is the first positional, and takes the "--" right before or after it
	// with it; everything else left over is unrecognised, in order.
	event, absorbed := -1, -1
	if opts.command == "hook" {
		for index, it := range items {
			if it.kind == 'A' {
				event = index
				break
			}
		}
		if event < 0 {
			return nil, usageError{"the following arguments are required: EVENT"}
		}
		opts.event = items[event].word
		if event > 0 && items[event-1].kind == 'S' {
			absorbed = event - 1
		} else if event+1 < len(items) && items[event+1].kind == 'S' {
			absorbed = event + 1
		}
	}
	var unknown []string
	for index, it := range items {
		if index != event && index != absorbed && it.kind != 'O' {
			unknown = append(unknown, it.word)
		}
	}
	if len(unknown) > 0 {
		return nil, usageError{"unrecognized arguments: " + strings.Join(unknown, " ")}
	}
	return opts, nil
}

func (o *options) set(name, value string) error {
	switch name {
	case "--socket":
		o.socket = value
	case "--url":
		o.url = value
	case "--token-file":
		o.tokenFile = value
	case "--config":
		o.config = value
	case "--fallback":
		if value != "none" && value != "in-process" {
			return usageError{fmt.Sprintf(
				"argument --fallback: invalid choice: %s (choose from 'none', 'in-process')",
				pyRepr(value))}
		}
		o.fallback = value
	case "--timeout":
		seconds, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || math.IsNaN(seconds) || !(seconds > 0 && seconds < 1e9) {
			return usageError{fmt.Sprintf("argument --timeout: %s is not a number of seconds above 0",
				pyRepr(value))}
		}
		o.timeout = seconds
	}
	return nil
}

const hookHelp = `usage: cloudrunner-hook hook EVENT [--socket PATH | --url http://HOST:PORT]
                             [--token-file FILE] [--exit-code]
                             [--fallback {none,in-process}] [--fail-closed | --fail-open]
                             [--in-process] [--config FILE] [--timeout SECONDS]
       cloudrunner-hook health [--socket PATH | --url http://HOST:PORT]
                               [--token-file FILE] [--ready] [--timeout SECONDS]
       cloudrunner-hook --version

The compiled per-event client of cloudrunner: the event JSON on stdin, the daemon's
answer on stdout. The same flags, variables, answers and exit codes as
'cloudrunner hook' and 'cloudrunner health'.

  EVENT                 the hook event name (beforeShellExecution, ...)
  --socket PATH         the daemon's unix socket (CLOUDRUNNER_SOCKET; default
                        $CLOUDRUNNER_STATE_DIR/cloudrunner.sock, state dir /var/lib/cloudrunner)
  --url http://HOST:PORT
                        the daemon's TCP address (CLOUDRUNNER_URL)
  --token-file FILE     bearer token for --url (CLOUDRUNNER_TOKEN_FILE)
  --exit-code           exit 2 on a block, like a single hook (the answer is still printed)
  --fallback {none,in-process}
                        with no daemon: run the event through the Python 'cloudrunner'
                        (in-process), or answer by the fail policy (none, the default;
                        CLOUDRUNNER_FALLBACK)
  --fail-closed         when no daemon answers, block the event (CLOUDRUNNER_FAIL_CLOSED=1)
  --fail-open           when no daemon answers, let it through (CLOUDRUNNER_FAIL_CLOSED=0)
  --in-process          run the event through the Python 'cloudrunner' without a daemon
  --config FILE         settings file for --fallback in-process
  --timeout SECONDS     how long to wait for the answer (default 600; health: 5)
  --ready               health: check /readyz (engine and images) instead of /healthz
  --version             print the version and the commit it was built from, as
                        'cloudrunner --version' does

Exit codes: 0 answered (or let through), 2 a block under --exit-code, 64 a usage error,
70 a bug (its trace saved in a file the one stderr line names); health: 0 healthy, 1 not.
`
