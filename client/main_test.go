package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

func TestVersionFlagPrintsTheStampedVersionAndCommit(t *testing.T) {
	version, commit = "1.2.3", "0123456789ab"
	defer func() { version, commit = "unknown", "unknown" }()
	var out, errs bytes.Buffer
	if code := run([]string{"--version"}, nil, &out, &errs); code != 0 || errs.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs.String())
	}
	if got := out.String(); got != "cloudrunner-hook 1.2.3 (commit 0123456789ab)\n" {
		t.Fatalf("printed %q", got)
	}
}

func TestAUsageErrorIsOneLineAndExit64(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"hook", "stop", "--bogus"}, nil, &out, &errs); code != 64 || out.Len() != 0 ||
		errs.String() != "cloudrunner: error: unrecognized arguments: --bogus\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errs.String())
	}
}

// internal/wire's reason to be: the binary must not link net/http (or what it drags in) again.
func TestTheBinaryDoesNotImportNetHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "net/http" || pkg == "crypto/tls" || pkg == "crypto/x509" || pkg == "mime" {
			t.Errorf("the client imports %s; its start-up then costs every event", pkg)
		}
	}
}

// main imports every standard package the client's packages import (main.go says why).
func TestMainImportsWhatTheClientsPackagesImport(t *testing.T) {
	list := func(pattern string) []string {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pattern).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pattern, err)
		}
		return strings.Fields(string(out))
	}
	mine := map[string]bool{}
	for _, pkg := range list(".") {
		mine[pkg] = true
	}
	for _, pkg := range list("./internal/...") {
		if !strings.HasPrefix(pkg, "cloudrunner.invalid/") && !mine[pkg] {
			t.Errorf("internal/ imports %s and main.go does not: add it to main's imports", pkg)
		}
	}
}
