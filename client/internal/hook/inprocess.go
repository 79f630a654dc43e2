package hook

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"cloudrunner.invalid/cloudrunner-hook/internal/cli"
	"cloudrunner.invalid/cloudrunner-hook/internal/text"
)

// pythonCommand finds the Python `cloudrunner` command: beside this binary first (both sit
// in the same bin directory when installed by the project's setup), then on PATH.
func pythonCommand() (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "cloudrunner")
		if info, err := os.Stat(beside); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	return exec.LookPath("cloudrunner")
}

// inProcess runs the event without a daemon through the Python client
// (`cloudrunner hook EVENT --in-process ...`, the payload on its stdin): the worker, the
// sandbox and the audit log live there. Its answer, stderr and exit code are ours.
func inProcess(opts *cli.Hook, p policyInput, stdout, stderr io.Writer) int {
	command, err := pythonCommand()
	if err != nil {
		problem := "--fallback in-process needs the Python cloudrunner command, which is not " +
			"installed beside cloudrunner-hook or on PATH"
		return byPolicy(p, problem, true, stdout, stderr)
	}
	args := []string{"hook", p.event, "--in-process"}
	if opts.Socket != "" {
		args = append(args, "--socket", opts.Socket)
	}
	if opts.URL != "" {
		args = append(args, "--url", opts.URL)
	}
	if opts.TokenFile != "" {
		args = append(args, "--token-file", opts.TokenFile)
	}
	if opts.Config != "" {
		args = append(args, "--config", opts.Config)
	}
	if opts.ExitCode {
		args = append(args, "--exit-code")
	}
	switch p.flag {
	case "closed":
		args = append(args, "--fail-closed")
	case "open":
		args = append(args, "--fail-open")
	}
	child := exec.Command(command, args...)
	child.Stdin = bytes.NewReader(p.payload)
	child.Stdout = stdout
	child.Stderr = stderr
	err = child.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if code := exit.ExitCode(); code >= 0 {
			return code
		}
		return 1
	}
	if err != nil {
		problem := "--fallback in-process could not start " + command + " (" + text.OSText(err) + ")"
		return byPolicy(p, problem, true, stdout, stderr)
	}
	return 0
}
