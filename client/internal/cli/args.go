package cli

import (
	"fmt"
	"strings"
)

// spec is one command's flags, read by scan with the rules Python's argparse has for them
// (the Python client parses its command line with argparse, and both clients must say the
// same to the same words).
type spec struct {
	values     []string    // flags that take a value (--socket PATH, --socket=PATH)
	switches   []string    // flags that take none; --help and -h are every command's
	exclusive  [][2]string // flags that cannot be given together
	positional string      // the one required positional's name ("" when there is none)
}

func has(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// UsageError is a command line that cannot be run, in argparse's words.
type UsageError struct{ Message string }

func (e UsageError) Error() string { return e.Message }

func usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

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

func isFlag(word string) bool {
	return strings.HasPrefix(word, "-") && word != "-" && !looksNegative(word)
}

// scan reads a command's words (after the command's name) in order, as argparse does: each
// flag is handed to set when met (a value flag with its value, a switch with ""), so the first
// bad one is the one said; --help stops the reading (help true). It returns the positional.
func scan(words []string, s spec, set func(name, value string) error) (positional string, help bool, err error) {
	// the words in order: 'A' a positional, 'S' the first "--" (after which every word
	// is positional), 'O' a known flag (with its value), 'U' an unknown flag
	type item struct {
		word string
		kind byte
	}
	var items []item
	separated := false
	seen := map[string]bool{}
	for i := 0; i < len(words); i++ {
		word := words[i]
		if separated || !isFlag(word) {
			items = append(items, item{word, 'A'})
			continue
		}
		if word == "--" {
			items = append(items, item{word, 'S'})
			separated = true
			continue
		}
		name, inline, hasInline := strings.Cut(word, "=")
		isValue := has(s.values, name)
		isSwitch := name == "--help" || name == "-h" || has(s.switches, name)
		if !isValue && !isSwitch {
			items = append(items, item{word, 'U'})
			continue
		}
		items = append(items, item{word, 'O'})
		value := ""
		if isValue {
			value = inline
			if !hasInline {
				if i+1 >= len(words) || isFlag(words[i+1]) {
					return "", false, usagef("argument %s: expected one argument", name)
				}
				i++
				value = words[i]
			}
		} else if hasInline {
			return "", false, usagef("argument %s: ignored explicit argument %s", name, pyRepr(inline))
		}
		seen[name] = true
		for _, pair := range s.exclusive {
			for j, member := range pair {
				if member == name && seen[pair[1-j]] {
					return "", false, usagef("argument %s: not allowed with argument %s", name, pair[1-j])
				}
			}
		}
		if name == "--help" || name == "-h" {
			return "", true, nil
		}
		if err := set(name, value); err != nil {
			return "", false, err
		}
	}
	// argparse: the positional is the first positional word, and takes the "--" right
	// before or after it with it; everything else left over is unrecognised, in order.
	at, absorbed := -1, -1
	if s.positional != "" {
		for index, it := range items {
			if it.kind == 'A' {
				at = index
				break
			}
		}
		if at < 0 {
			return "", false, usagef("the following arguments are required: %s", s.positional)
		}
		positional = items[at].word
		if at > 0 && items[at-1].kind == 'S' {
			absorbed = at - 1
		} else if at+1 < len(items) && items[at+1].kind == 'S' {
			absorbed = at + 1
		}
	}
	var unknown []string
	for index, it := range items {
		if index != at && index != absorbed && it.kind != 'O' {
			unknown = append(unknown, it.word)
		}
	}
	if len(unknown) > 0 {
		return "", false, usagef("unrecognized arguments: %s", strings.Join(unknown, " "))
	}
	return positional, false, nil
}
