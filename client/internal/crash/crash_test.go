package crash

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
	code := Guarded(func() int {
		words := strings.Fields(os.Getenv("CLOUDRUNNER_TEST_NO_SUCH_VARIABLE"))
		return len(words[0]) // no words: a real runtime panic (index out of range)
	}, &stderr)
	if code != ExitInternal {
		t.Fatalf("exit %d, want %d (Go's own panic status 2 would read as a block)", code, ExitInternal)
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
	if !strings.Contains(string(trace), "index out of range") ||
		!strings.Contains(string(trace), "crash_test.go") {
		t.Fatalf("the file must hold the panic and its stack, got %q", trace)
	}
}

func TestATraceThatCannotBeSavedGoesToStderr(t *testing.T) {
	var stderr bytes.Buffer
	code := reportBug("string", "panic: boom\n\nstack here\n",
		filepath.Join(t.TempDir(), "missing"), &stderr)
	text := stderr.String()
	if code != ExitInternal || !strings.Contains(text, "stack here") ||
		!strings.Contains(text, "could not save it") {
		t.Fatalf("exit %d, stderr %q: the trace must never be lost", code, text)
	}
}

func TestNoPanicKeepsTheExitCode(t *testing.T) {
	var stderr bytes.Buffer
	if code := Guarded(func() int { return 2 }, &stderr); code != 2 || stderr.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
