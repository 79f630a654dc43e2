// Package cli reads cloudrunner-hook's command line: `hook EVENT [flags]`, `health [flags]`,
// `--version` and `--help`, each command with its own flags and parser, with the messages
// Python's argparse gives for the same words (the Python client's command line).
package cli

import (
	"io"

	"cloudrunner.invalid/cloudrunner-hook/internal/text"
)

// ExitUsage is the exit code of a usage error, as the Python client's.
const ExitUsage = 64

// Fail says a usage error in one line on stderr and returns ExitUsage.
func Fail(stderr io.Writer, message string) int {
	text.Say(stderr, "cloudrunner: error: "+message)
	return ExitUsage
}

// Command is what the command line asks for: exactly one of Help, Version, Hook, Health.
type Command struct {
	Help    bool
	Version bool
	Hook    *Hook
	Health  *Health
}

// Parse reads the words after the program's name; its errors are UsageErrors.
func Parse(words []string) (Command, error) {
	if len(words) == 0 {
		return Command{}, usagef("the following arguments are required: command")
	}
	switch words[0] {
	case "--help", "-h":
		return Command{Help: true}, nil
	case "--version":
		return Command{Version: true}, nil
	case "hook":
		opts, help, err := parseHook(words[1:])
		return Command{Help: help, Hook: opts}, err
	case "health":
		opts, help, err := parseHealth(words[1:])
		return Command{Help: help, Health: opts}, err
	}
	return Command{}, usagef("argument command: invalid choice: %s (choose from 'hook', 'health')",
		pyRepr(words[0]))
}

func pyRepr(s string) string { return text.PyRepr(s) }
