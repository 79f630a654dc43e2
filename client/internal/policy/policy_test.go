package policy

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"cloudrunner.invalid/cloudrunner-hook/internal/wire"
)

func TestRunDirIsTheSocketsDirectoryOrTheStateDirForTCP(t *testing.T) {
	t.Setenv("CLOUDRUNNER_STATE_DIR", "")
	cases := map[string]string{"/var/lib/cr/cloudrunner.sock": "/var/lib/cr", "/x.sock": "/",
		"x.sock": ".", "a/b.sock": "a"}
	for socket, want := range cases {
		if got := RunDir(wire.Endpoint{SocketPath: socket}); got != want {
			t.Errorf("runDir(%q) = %q, want %q", socket, got, want)
		}
	}
	if got := RunDir(wire.Endpoint{Host: "h", Port: 1}); got != "" {
		t.Errorf("TCP without a state dir: %q", got)
	}
	t.Setenv("CLOUDRUNNER_STATE_DIR", "/srv/state/")
	if got := RunDir(wire.Endpoint{Host: "h", Port: 1}); got != "/srv/state" {
		t.Errorf("TCP with a state dir: %q", got)
	}
}

func TestDecideFollowsFlagsThenEnvThenThePolicy(t *testing.T) {
	dir := t.TempDir()
	if d := Decide("preToolUse", "", "", dir); d.Closed || d.DecidedBy != "no-policy" ||
		!strings.Contains(d.Notes[0], "no fail policy was published at "+dir+"/fail-policy.json") {
		t.Fatalf("no file: %+v", d)
	}
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(dir, policyName), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"version": 1, "daemon": "w1", "fail_closed_events": ["preToolUse"], "extra": 1}`)
	if d := Decide("preToolUse", "", "", dir); !d.Closed || d.DecidedBy != "policy" || *d.PolicyDaemon != "w1" {
		t.Fatalf("listed: %+v", d)
	}
	if d := Decide("stop", "", "", dir); d.Closed || d.DecidedBy != "policy" {
		t.Fatalf("not listed: %+v", d)
	}
	if d := Decide("preToolUse", "open", "closed", dir); d.Closed || d.DecidedBy != "flag" {
		t.Fatalf("flag: %+v", d)
	}
	if d := Decide("preToolUse", "", "open", dir); d.Closed || d.DecidedBy != "env" {
		t.Fatalf("env: %+v", d)
	}
	for text, why := range map[string]string{
		`{"version": 2, "fail_closed_events": []}`:    "version is not 1",
		`{"version": true, "fail_closed_events": []}`: "version is not 1",
		`{"version": 1, "fail_closed_events": "x"}`:   "fail_closed_events is not a list",
		`{"version": 1, "fail_closed_events": [1]}`:   "fail_closed_events is not a list",
		`[1]`: "not a JSON object",
		`{"version": 1, "fail_closed_events": ["preToo`: "not valid JSON",
	} {
		write(text)
		d := Decide("preToolUse", "", "", dir)
		if d.Closed || d.DecidedBy != "no-policy" || !strings.Contains(d.Notes[0], why) {
			t.Errorf("%s: %+v", text, d)
		}
	}
}

func TestEnvFailClosedIsStrict(t *testing.T) {
	for value, want := range map[string]string{"": "", "1": "closed", "TRUE": "closed", "yes": "closed",
		"0": "open", "false": "open", "No": "open"} {
		t.Setenv("CLOUDRUNNER_FAIL_CLOSED", value)
		if got, err := EnvFailClosed(); err != nil || got != want {
			t.Errorf("%q: %q %v", value, got, err)
		}
	}
	t.Setenv("CLOUDRUNNER_FAIL_CLOSED", "maybe")
	if _, err := EnvFailClosed(); err == nil || !strings.Contains(err.Error(), "'maybe' must be 1") {
		t.Errorf("maybe: %v", err)
	}
}

func TestAnUnusablePolicyIsNamedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, policyName)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// a FIFO with no writer would block a plain open; it is not a regular file
	if d := Decide("preToolUse", "", "", dir); d.Closed || !strings.Contains(d.Notes[0],
		"is not usable (not a regular file); failing open") {
		t.Fatalf("fifo: %+v", d)
	}
	os.Remove(path)
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	if d := Decide("preToolUse", "", "", dir); !strings.Contains(d.Notes[0], "(not a regular file)") {
		t.Fatalf("/dev/zero: %+v", d)
	}
	os.Remove(path)
	if err := os.WriteFile(path, []byte(strings.Repeat("[", 200000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := Decide("preToolUse", "", "", dir); !strings.Contains(d.Notes[0], "(nested deeper than 64 levels)") {
		t.Fatalf("deep: %+v", d)
	}
	if err := os.WriteFile(path, make([]byte, policyMaxBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := Decide("preToolUse", "", "", dir); !strings.Contains(d.Notes[0], "(larger than 1048576 bytes)") {
		t.Fatalf("huge: %+v", d)
	}
}

func TestNestingIgnoresBracketsInStrings(t *testing.T) {
	inString := `{"a": "` + strings.Repeat("[", 100) + `\"` + `"}`
	if nestingOver([]byte(inString), 64) {
		t.Fatal("brackets inside a string counted")
	}
	if !nestingOver([]byte(strings.Repeat("[", 65)), 64) || nestingOver([]byte(strings.Repeat("[", 64)), 64) {
		t.Fatal("the bound is off")
	}
}
