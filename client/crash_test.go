package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAPanicExitsSeventyWithItsTraceInAUserOnlyFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	var stderr bytes.Buffer
	code := guarded(func() int {
		var answer map[string]any
		answer["decision"] = "allow" // a nil map: a real runtime panic
		return 0
	}, &stderr)
	if code != exitInternal {
		t.Fatalf("exit %d, want %d (Go's own panic status 2 would read as a block)", code, exitInternal)
	}
	line := strings.TrimSpace(stderr.String())
	if strings.Count(line, "\n") != 0 || !strings.HasPrefix(line, "cloudrunner: internal error (") {
		t.Fatalf("want one line naming the bug, got %q", line)
	}
	files, _ := filepath.Glob(filepath.Join(dir, bugFilePrefix+"*.log"))
	if len(files) != 1 || !strings.Contains(line, files[0]) {
		t.Fatalf("the line %q must name the one trace file, found %v", line, files)
	}
	info, err := os.Stat(files[0])
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the trace file must be readable by the user only: %v %v", info.Mode(), err)
	}
	trace, _ := os.ReadFile(files[0])
	if !strings.Contains(string(trace), "assignment to entry in nil map") ||
		!strings.Contains(string(trace), "crash_test.go") {
		t.Fatalf("the file must hold the panic and its stack, got %q", trace)
	}
}

func TestATraceThatCannotBeSavedGoesToStderr(t *testing.T) {
	var stderr bytes.Buffer
	code := reportBug("string", "panic: boom\n\nstack here\n",
		filepath.Join(t.TempDir(), "missing"), &stderr)
	text := stderr.String()
	if code != exitInternal || !strings.Contains(text, "stack here") ||
		!strings.Contains(text, "could not save it") {
		t.Fatalf("exit %d, stderr %q: the trace must never be lost", code, text)
	}
}

func TestNoPanicKeepsTheExitCode(t *testing.T) {
	var stderr bytes.Buffer
	if code := guarded(func() int { return 2 }, &stderr); code != 2 || stderr.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
