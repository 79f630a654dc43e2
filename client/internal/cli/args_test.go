package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestParseArgsReadsTheFlagsInAnyOrder(t *testing.T) {
	command, err := Parse([]string{"hook", "--exit-code", "beforeShellExecution",
		"--socket=/run/cr.sock", "--timeout", "2.5", "--fail-open", "--fallback", "in-process"})
	if err != nil {
		t.Fatal(err)
	}
	opts := command.Hook
	if command.Health != nil || command.Help || opts.Event != "beforeShellExecution" || !opts.ExitCode ||
		opts.Socket != "/run/cr.sock" || opts.Timeout != 2.5 || opts.FailFlag != "open" ||
		opts.Fallback != "in-process" {
		t.Fatalf("parsed %+v", opts)
	}
	command, err = Parse([]string{"health", "--ready", "--url", "http://h:1"})
	if err != nil || command.Hook != nil || !command.Health.Ready || command.Health.URL != "http://h:1" ||
		command.Health.Timeout != 5 {
		t.Fatalf("parsed %+v, %v", command.Health, err)
	}
}

func TestParseArgsSaysWhatArgparseSays(t *testing.T) {
	cases := map[string]string{
		"hook":                                 "the following arguments are required: EVENT",
		"hook stop --bogus x":                  "unrecognized arguments: --bogus x",
		"hook stop --socket":                   "argument --socket: expected one argument",
		"hook stop --socket --exit-code":       "argument --socket: expected one argument",
		"hook stop --fallback maybe":           "argument --fallback: invalid choice: 'maybe' (choose from 'none', 'in-process')",
		"hook stop --timeout 0":                "argument --timeout: '0' is not a number of seconds above 0",
		"hook stop --timeout nan":              "argument --timeout: 'nan' is not a number of seconds above 0",
		"hook stop --timeout -1":               "argument --timeout: '-1' is not a number of seconds above 0",
		"hook stop --socket /a --url http://h": "argument --url: not allowed with argument --socket",
		"hook stop --fail-closed --fail-open":  "argument --fail-open: not allowed with argument --fail-closed",
		"hook stop --exit-code=1":              "argument --exit-code: ignored explicit argument '1'",
		"hook stop --exit":                     "unrecognized arguments: --exit",
		"hook stop x --bogus":                  "unrecognized arguments: x --bogus",
		"hook --":                              "the following arguments are required: EVENT",
		"hook stop -- x":                       "unrecognized arguments: x",
		"hook stop -- --":                      "unrecognized arguments: --",
		"hook -- -- stop":                      "unrecognized arguments: stop",
		"hook stop --exit-code --":             "unrecognized arguments: --",
		"health -- x":                          "unrecognized arguments: -- x",
		"health --timeout -1":                  "argument --timeout: '-1' is not a number of seconds above 0",
		"serve":                                "argument command: invalid choice: 'serve' (choose from 'hook', 'health')",
		"":                                     "the following arguments are required: command",
		"health --exit-code":                   "unrecognized arguments: --exit-code",
		"health --ready=1":                     "argument --ready: ignored explicit argument '1'",
		"health --url http://h --socket /a":    "argument --socket: not allowed with argument --url",
		"hook stop --ready":                    "unrecognized arguments: --ready",
		"hook stop --timeout 1 --timeout x":    "argument --timeout: 'x' is not a number of seconds above 0",
	}
	for line, want := range cases {
		_, err := Parse(strings.Fields(line))
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %q", line, err, want)
		}
	}
}

func TestNegativeNumbersAreValuesNotFlags(t *testing.T) {
	for word, want := range map[string]bool{"-1": true, "-12": true, "-.5": true, "-1.5": true,
		"-": false, "-1.": false, "-x": false, "--1": false, "-1.2.3": false, "1": false} {
		if looksNegative(word) != want {
			t.Errorf("%q: want %v", word, want)
		}
	}
}

func TestHelpStopsTheReadingAndTheVersionIsItsOwnCommand(t *testing.T) {
	for _, line := range []string{"--help", "-h", "hook --help --bogus", "hook stop -h", "health --ready --help"} {
		command, err := Parse(strings.Fields(line))
		if err != nil || !command.Help {
			t.Errorf("%q: %+v, %v", line, command, err)
		}
	}
	// an error met before --help is said, as argparse does
	if _, err := Parse(strings.Fields("hook stop --exit-code=1 --help")); err == nil {
		t.Error("an error before --help was not said")
	}
	if command, err := Parse([]string{"--version"}); err != nil || !command.Version {
		t.Errorf("--version: %+v, %v", command, err)
	}
	if _, err := Parse([]string{"health", "--version"}); err == nil ||
		err.Error() != "unrecognized arguments: --version" {
		t.Errorf("health --version: %v", err)
	}
}

// FuzzParse: any words either parse into exactly one command or give a UsageError (which,
// like argparse's, repeats an unrecognised word as it is, a newline in it included).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"hook stop --socket /a", "health --ready -- x", "hook -- -- stop",
		"hook stop --timeout -1.5", "hook stop --fail-closed --fail-open", "--version", "hook --url=x stop -h"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		command, err := Parse(strings.Split(line, " "))
		if err != nil {
			var usage UsageError
			if !errors.As(err, &usage) || usage.Message == "" {
				t.Fatalf("%q: an error that is not a usage error: %q", line, err)
			}
			return
		}
		chosen := 0
		for _, yes := range []bool{command.Help, command.Version, command.Hook != nil, command.Health != nil} {
			if yes {
				chosen++
			}
		}
		if chosen != 1 {
			t.Fatalf("%q: %+v is not one command", line, command)
		}
		if hook := command.Hook; hook != nil && (hook.Timeout <= 0 || !strings.Contains(" "+line+" ", " "+hook.Event+" ")) {
			t.Fatalf("%q: %+v", line, hook)
		}
	})
}
