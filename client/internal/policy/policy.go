// Package policy is the fail policy: how the client answers an event no daemon answered,
// from --fail-closed / --fail-open, then CLOUDRUNNER_FAIL_CLOSED, then the fail-policy.json
// the daemon publishes in its state directory (the contract shared with the Python client,
// cloudrunner/client_fallback.py, and the daemon, which writes the policy).
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"cloudrunner.invalid/cloudrunner-hook/internal/text"
	"cloudrunner.invalid/cloudrunner-hook/internal/wire"
)

const (
	policyName    = "fail-policy.json"
	policyVersion = 1
	// the policy file's bounds: its size, and how deep it nests (its own is two levels)
	policyMaxBytes = 1024 * 1024
	policyMaxDepth = 64
)

// RunDir is where the policy and the spool live: the socket's directory, or for a TCP
// endpoint $CLOUDRUNNER_STATE_DIR when set ("" = none).
func RunDir(ep wire.Endpoint) string {
	if ep.SocketPath != "" {
		slash := strings.LastIndex(ep.SocketPath, "/")
		switch {
		case slash < 0:
			return "."
		case slash == 0:
			return "/"
		}
		return ep.SocketPath[:slash]
	}
	state := os.Getenv("CLOUDRUNNER_STATE_DIR")
	if state == "" {
		return ""
	}
	if trimmed := strings.TrimRight(state, "/"); trimmed != "" {
		return trimmed
	}
	return "/"
}

func JoinDir(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// Decision is how the client answers an event no daemon answered, and why.
type Decision struct {
	Closed       bool
	DecidedBy    string // flag, env, policy or no-policy
	Notes        []string
	PolicyDaemon *string // the daemon that published the policy, when it said
	PolicyPath   string
}

// EnvFailClosed reads CLOUDRUNNER_FAIL_CLOSED: 1/true/yes closed, 0/false/no open,
// unset or empty: "" (no say).
func EnvFailClosed() (string, error) {
	value := os.Getenv("CLOUDRUNNER_FAIL_CLOSED")
	switch strings.ToLower(value) {
	case "":
		return "", nil
	case "1", "true", "yes":
		return "closed", nil
	case "0", "false", "no":
		return "open", nil
	}
	return "", fmt.Errorf("CLOUDRUNNER_FAIL_CLOSED=%s must be 1, true or yes "+
		"(fail closed) or 0, false or no (fail open)", text.PyRepr(value))
}

// Decide: the flags, then the variable, then the policy file.
func Decide(event, flag, envSay, dir string) Decision {
	if flag != "" {
		return Decision{Closed: flag == "closed", DecidedBy: "flag"}
	}
	if envSay != "" {
		return Decision{Closed: envSay == "closed", DecidedBy: "env"}
	}
	if dir == "" {
		return Decision{DecidedBy: "no-policy", Notes: []string{"cloudrunner: no fail policy for a " +
			"TCP daemon unless CLOUDRUNNER_STATE_DIR names its state directory; failing open"}}
	}
	path := JoinDir(dir, policyName)
	raw, why, err := readPolicy(path)
	if errors.Is(err, syscall.ENOENT) {
		return Decision{DecidedBy: "no-policy", Notes: []string{
			fmt.Sprintf("cloudrunner: no fail policy was published at %s; failing open", path)}}
	}
	if err != nil {
		return unusable(path, text.OSText(err))
	}
	if why != "" {
		return unusable(path, why)
	}
	if nestingOver(raw, policyMaxDepth) {
		return unusable(path, fmt.Sprintf("nested deeper than %d levels", policyMaxDepth))
	}
	var data any
	if json.Unmarshal(raw, &data) != nil {
		return unusable(path, "not valid JSON")
	}
	object, ok := data.(map[string]any)
	if !ok {
		return unusable(path, "not a JSON object")
	}
	if version, ok := object["version"].(float64); !ok || version != policyVersion {
		return unusable(path, fmt.Sprintf("version is not %d", policyVersion))
	}
	list, ok := object["fail_closed_events"].([]any)
	if !ok {
		return unusable(path, "fail_closed_events is not a list of event names")
	}
	closed := false
	for _, item := range list {
		name, ok := item.(string)
		if !ok {
			return unusable(path, "fail_closed_events is not a list of event names")
		}
		closed = closed || name == event
	}
	d := Decision{Closed: closed, DecidedBy: "policy", PolicyPath: path}
	if daemon, ok := object["daemon"].(string); ok {
		d.PolicyDaemon = &daemon
	}
	return d
}

// readPolicy reads the policy so that nothing planted in its place can delay the answer:
// opened without blocking (a FIFO with no writer, or one that never stops writing), used
// only when it is a regular file (never a FIFO, socket or device such as /dev/zero, also
// through a symbolic link), and read to at most policyMaxBytes. why names a file that is
// there but not usable; err an error opening or reading it.
func readPolicy(path string) (raw []byte, why string, err error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	}
	if err != nil {
		return nil, "", err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, "", err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, "not a regular file", nil
	}
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 64<<10)
	for len(buf) <= policyMaxBytes {
		want := policyMaxBytes + 1 - len(buf)
		if want > len(chunk) {
			want = len(chunk)
		}
		n, err := syscall.Read(fd, chunk[:want])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if n <= 0 {
			break
		}
		buf = append(buf, chunk[:n]...)
	}
	if len(buf) > policyMaxBytes {
		return nil, fmt.Sprintf("larger than %d bytes", policyMaxBytes), nil
	}
	return buf, "", nil
}

// nestingOver: whether JSON text nests arrays or objects deeper than limit (brackets in
// strings do not count), as the Python client checks it.
func nestingOver(raw []byte, limit int) bool {
	depth := 0
	inString, escaped := false, false
	for _, b := range raw {
		switch {
		case inString:
			if escaped {
				escaped = false
			} else if b == '\\' {
				escaped = true
			} else if b == '"' {
				inString = false
			}
		case b == '"':
			inString = true
		case b == '[' || b == '{':
			depth++
			if depth > limit {
				return true
			}
		case b == ']' || b == '}':
			depth--
		}
	}
	return false
}

func unusable(path, why string) Decision {
	return Decision{DecidedBy: "no-policy", Notes: []string{
		fmt.Sprintf("cloudrunner: the fail policy %s is not usable (%s); failing open", path, why)}}
}
