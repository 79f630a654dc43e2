package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRunDirIsTheSocketsDirectoryOrTheStateDirForTCP(t *testing.T) {
	t.Setenv("CLOUDRUNNER_STATE_DIR", "")
	cases := map[string]string{"/var/lib/cr/cloudrunner.sock": "/var/lib/cr", "/x.sock": "/",
		"x.sock": ".", "a/b.sock": "a"}
	for socket, want := range cases {
		if got := runDir(endpoint{socketPath: socket}); got != want {
			t.Errorf("runDir(%q) = %q, want %q", socket, got, want)
		}
	}
	if got := runDir(endpoint{host: "h", port: 1}); got != "" {
		t.Errorf("TCP without a state dir: %q", got)
	}
	t.Setenv("CLOUDRUNNER_STATE_DIR", "/srv/state/")
	if got := runDir(endpoint{host: "h", port: 1}); got != "/srv/state" {
		t.Errorf("TCP with a state dir: %q", got)
	}
}

func TestDecideFollowsFlagsThenEnvThenThePolicy(t *testing.T) {
	dir := t.TempDir()
	if d := decide("preToolUse", "", "", dir); d.closed || d.decidedBy != "no-policy" ||
		!strings.Contains(d.notes[0], "no fail policy was published at "+dir+"/fail-policy.json") {
		t.Fatalf("no file: %+v", d)
	}
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(dir, policyName), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"version": 1, "daemon": "w1", "fail_closed_events": ["preToolUse"], "extra": 1}`)
	if d := decide("preToolUse", "", "", dir); !d.closed || d.decidedBy != "policy" || *d.policyDaemon != "w1" {
		t.Fatalf("listed: %+v", d)
	}
	if d := decide("stop", "", "", dir); d.closed || d.decidedBy != "policy" {
		t.Fatalf("not listed: %+v", d)
	}
	if d := decide("preToolUse", "open", "closed", dir); d.closed || d.decidedBy != "flag" {
		t.Fatalf("flag: %+v", d)
	}
	if d := decide("preToolUse", "", "open", dir); d.closed || d.decidedBy != "env" {
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
		d := decide("preToolUse", "", "", dir)
		if d.closed || d.decidedBy != "no-policy" || !strings.Contains(d.notes[0], why) {
			t.Errorf("%s: %+v", text, d)
		}
	}
}

func TestEnvFailClosedIsStrict(t *testing.T) {
	for value, want := range map[string]string{"": "", "1": "closed", "TRUE": "closed", "yes": "closed",
		"0": "open", "false": "open", "No": "open"} {
		t.Setenv("CLOUDRUNNER_FAIL_CLOSED", value)
		if got, err := envFailClosed(); err != nil || got != want {
			t.Errorf("%q: %q %v", value, got, err)
		}
	}
	t.Setenv("CLOUDRUNNER_FAIL_CLOSED", "maybe")
	if _, err := envFailClosed(); err == nil || !strings.Contains(err.Error(), "'maybe' must be 1") {
		t.Errorf("maybe: %v", err)
	}
}

func TestASpoolLineCarriesTheContractsFields(t *testing.T) {
	payload := []byte(`{"conversation_id": "` + strings.Repeat("c", 300) + `", "generation_id": 7}`)
	answer := blockedAnswer("preToolUse", "blocked: "+strings.Repeat("p", 5000))
	line := spoolLine("preToolUse", answer, true, strings.Repeat("p", 5000), decision{decidedBy: "env"}, payload)
	if len(line) > spoolLineMaxBytes || line[len(line)-1] != '\n' {
		t.Fatalf("line of %d bytes", len(line))
	}
	var record map[string]any
	if err := json.Unmarshal(line, &record); err != nil {
		t.Fatal(err)
	}
	if record["version"] != 1.0 || record["outcome"] != "blocked" || record["decided_by"] != "env" ||
		record["client"] != "cloudrunner-hook" || record["generation_id"] != nil ||
		len(record["conversation_id"].(string)) != 200 || len(record["payload_sha256"].(string)) != 64 ||
		!strings.HasSuffix(record["time"].(string), "Z") {
		t.Fatalf("record %v", record)
	}
	if line := spoolLine("stop", map[string]any{}, false, "p", decision{}, []byte("not json")); !strings.Contains(
		string(line), `"conversation_id":null`) {
		t.Fatalf("not JSON: %s", line)
	}
}

func TestTheSpoolIsBoundedAndSaysWhenItCannotRecord(t *testing.T) {
	dir := t.TempDir()
	line := []byte(strings.Repeat("x", 1000) + "\n")
	if note := appendSpool(dir, line); note != "" {
		t.Fatal(note)
	}
	info, _ := os.Stat(filepath.Join(dir, spoolName))
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", info.Mode())
	}
	if err := os.Truncate(filepath.Join(dir, spoolName), spoolMaxBytes-500); err != nil {
		t.Fatal(err)
	}
	note := appendSpool(dir, line)
	if note != "cloudrunner: the fallback spool "+dir+"/fallback.spool is full (1 MiB); this event is not recorded" {
		t.Fatalf("full: %q", note)
	}
	note = appendSpool(filepath.Join(dir, "missing"), line)
	if !strings.Contains(note, "(no such file or directory); this event is not recorded") {
		t.Fatalf("missing dir: %q", note)
	}
	if note := appendSpool("", line); !strings.Contains(note, "not recorded in a fallback spool") {
		t.Fatalf("TCP: %q", note)
	}
}

func TestAnUnusablePolicyIsNamedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, policyName)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// a FIFO with no writer would block a plain open; it is not a regular file
	if d := decide("preToolUse", "", "", dir); d.closed || !strings.Contains(d.notes[0],
		"is not usable (not a regular file); failing open") {
		t.Fatalf("fifo: %+v", d)
	}
	os.Remove(path)
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	if d := decide("preToolUse", "", "", dir); !strings.Contains(d.notes[0], "(not a regular file)") {
		t.Fatalf("/dev/zero: %+v", d)
	}
	os.Remove(path)
	if err := os.WriteFile(path, []byte(strings.Repeat("[", 200000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := decide("preToolUse", "", "", dir); !strings.Contains(d.notes[0], "(nested deeper than 64 levels)") {
		t.Fatalf("deep: %+v", d)
	}
	if err := os.WriteFile(path, make([]byte, policyMaxBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := decide("preToolUse", "", "", dir); !strings.Contains(d.notes[0], "(larger than 1048576 bytes)") {
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
