package spool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloudrunner.invalid/cloudrunner-hook/internal/events"
	"cloudrunner.invalid/cloudrunner-hook/internal/policy"
)

func TestASpoolLineCarriesTheContractsFields(t *testing.T) {
	payload := []byte(`{"conversation_id": "` + strings.Repeat("c", 300) + `", "generation_id": 7}`)
	answer := events.BlockedAnswer("preToolUse", "blocked: "+strings.Repeat("p", 5000))
	line := Line("preToolUse", answer, true, strings.Repeat("p", 5000), policy.Decision{DecidedBy: "env"}, payload)
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
	if line := Line("stop", map[string]any{}, false, "p", policy.Decision{}, []byte("not json")); !strings.Contains(
		string(line), `"conversation_id":null`) {
		t.Fatalf("not JSON: %s", line)
	}
}

func TestTheSpoolIsBoundedAndSaysWhenItCannotRecord(t *testing.T) {
	dir := t.TempDir()
	line := []byte(strings.Repeat("x", 1000) + "\n")
	if note := Append(dir, line); note != "" {
		t.Fatal(note)
	}
	info, _ := os.Stat(filepath.Join(dir, spoolName))
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", info.Mode())
	}
	if err := os.Truncate(filepath.Join(dir, spoolName), spoolMaxBytes-500); err != nil {
		t.Fatal(err)
	}
	note := Append(dir, line)
	if note != "cloudrunner: the fallback spool "+dir+"/fallback.spool is full (1 MiB); this event is not recorded" {
		t.Fatalf("full: %q", note)
	}
	note = Append(filepath.Join(dir, "missing"), line)
	if !strings.Contains(note, "(no such file or directory); this event is not recorded") {
		t.Fatalf("missing dir: %q", note)
	}
	if note := Append("", line); !strings.Contains(note, "not recorded in a fallback spool") {
		t.Fatalf("TCP: %q", note)
	}
}
