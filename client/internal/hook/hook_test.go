package hook

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloudrunner.invalid/cloudrunner-hook/internal/cli"
	"cloudrunner.invalid/cloudrunner-hook/internal/wire"
)

func stat(t *testing.T, path string, flag int) os.FileInfo {
	t.Helper()
	file, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Skipf("%s: %v", path, err)
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// The terminal check is a stat, no ioctl: a terminal is a character device that is not one
// of the memory devices (/dev/null is a stdin the read then names, as the Python client does).
func TestOnlyATerminalIsATerminal(t *testing.T) {
	for _, path := range []string{"/dev/null", "/dev/zero"} {
		if isTerminal(stat(t, path, os.O_RDONLY)) {
			t.Errorf("%s taken for a terminal", path)
		}
	}
	regular := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(regular, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if isTerminal(stat(t, regular, os.O_RDONLY)) {
		t.Error("a regular file taken for a terminal")
	}
	reader, writer, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	defer writer.Close()
	if info, _ := reader.Stat(); isTerminal(info) {
		t.Error("a pipe taken for a terminal")
	}
	// /dev/ptmx is the pseudo-terminal multiplexer (major 5): a terminal device
	if !isTerminal(stat(t, "/dev/ptmx", os.O_RDWR)) {
		t.Error("/dev/ptmx not taken for a terminal")
	}
}

func TestMajorIsGlibcs(t *testing.T) {
	cases := map[uint64]uint64{0x0103: 1, 0x8800: 136, 0x0500: 5, 0x1000_0000_0500: 0x1005}
	for dev, want := range cases {
		if got := major(dev); got != want {
			t.Errorf("major(%#x) = %d, want %d", dev, got, want)
		}
	}
}

func TestStdinFromATerminalOrClosedIsAUsageError(t *testing.T) {
	opts := &cli.Hook{Event: "stop", Socket: filepath.Join(t.TempDir(), "none.sock"), Timeout: 1}
	closed, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	var out, errs bytes.Buffer
	if code := Run(opts, closed, &out, &errs); code != cli.ExitUsage || errs.String() !=
		"cloudrunner: error: cloudrunner hook reads the event JSON on stdin, and stdin is closed\n" {
		t.Fatalf("closed: exit %d, %q", code, errs.String())
	}
	tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skip(err)
	}
	defer tty.Close()
	errs.Reset()
	if code := Run(opts, tty, &out, &errs); code != cli.ExitUsage || !strings.HasSuffix(errs.String(), "; pipe it in\n") {
		t.Fatalf("terminal: exit %d, %q", code, errs.String())
	}
}

func TestABlockSaysItsMessage(t *testing.T) {
	cases := map[string]string{
		`{"permission":"deny","agent_message":"no","user_message":"u"}`: "no",
		`{"continue":false,"user_message":"stop"}`:                      "stop",
		`{"permission":"deny","agent_message":""}`:                      "blocked by cloudrunner",
		`not json`: "blocked by cloudrunner",
	}
	for body, want := range cases {
		if got := blockMessage([]byte(body)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

func TestAnErrorIsTheDaemonsCodeOrTheStatus(t *testing.T) {
	code, message := errorOf(&wire.Reply{Status: 503, Body: []byte(`{"error":{"code":"draining","message":"closing"}}`)})
	if code != "draining" || message != "closing" {
		t.Errorf("%s %s", code, message)
	}
	code, message = errorOf(&wire.Reply{Status: 502, Body: []byte("  bad\xffgateway " + strings.Repeat("x", 300))})
	if code != "http-502" || !strings.HasPrefix(message, "HTTP 502: bad\ufffdgateway x") ||
		len([]rune(message)) != len("HTTP 502: ")+200 {
		t.Errorf("%s %q", code, message)
	}
}
