package main

import (
	"strings"
	"testing"
)

func TestParseArgsReadsTheFlagsInAnyOrder(t *testing.T) {
	opts, err := parseArgs([]string{"hook", "--exit-code", "beforeShellExecution",
		"--socket=/run/cr.sock", "--timeout", "2.5", "--fail-open", "--fallback", "in-process"})
	if err != nil {
		t.Fatal(err)
	}
	if opts.event != "beforeShellExecution" || !opts.exitCode || opts.socket != "/run/cr.sock" ||
		opts.timeout != 2.5 || opts.failFlag != "open" || opts.fallback != "in-process" {
		t.Fatalf("parsed %+v", opts)
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
	}
	for line, want := range cases {
		_, err := parseArgs(strings.Fields(line))
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

func TestPyReprQuotesLikePython(t *testing.T) {
	cases := map[string]string{"x": "'x'", "it's": `"it's"`, `a'"b`: `'a\'"b'`, "": "''",
		"a\r\nb\\": `'a\r\nb\\'`, "\x00\x7f\u0085": `'\x00\x7f\x85'`, "é": "'é'", "\xff": `'\udcff'`,
		"\u200b": `'\u200b'`}
	for in, want := range cases {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestEventNamesAreLettersAndDigits(t *testing.T) {
	for _, bad := range []string{"", "a b", "../x", "x HTTP/1.1\r\nAuthorization: y", strings.Repeat("a", 65), "é"} {
		if !badEventName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	if badEventName("beforeShellExecution") {
		t.Error("a real event refused")
	}
}

func TestFormatSecondsIsPythonsG(t *testing.T) {
	cases := map[float64]string{600: "600", 0.5: "0.5", 1234567: "1.23457e+06", 2.25: "2.25"}
	for in, want := range cases {
		if got := formatSeconds(in); got != want {
			t.Errorf("formatSeconds(%v) = %s, want %s", in, got, want)
		}
	}
}
