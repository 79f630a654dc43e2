package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// The fail policy and the fallback spool: the contract shared with the Python client
// (cloudrunner/client_fallback.py) and the daemon, which writes the policy and ingests
// the spool.
const (
	policyName        = "fail-policy.json"
	policyVersion     = 1
	spoolName         = "fallback.spool"
	spoolVersion      = 1
	spoolMaxBytes     = 1024 * 1024
	spoolLineMaxBytes = 4096
	clientName        = "cloudrunner-hook"
	idMaxChars        = 200
	// the policy file's bounds: its size, and how deep it nests (its own is two levels)
	policyMaxBytes = 1024 * 1024
	policyMaxDepth = 64
)

// runDir is where the policy and the spool live: the socket's directory, or for a TCP
// endpoint $CLOUDRUNNER_STATE_DIR when set ("" = none).
func runDir(ep endpoint) string {
	if ep.socketPath != "" {
		slash := strings.LastIndex(ep.socketPath, "/")
		switch {
		case slash < 0:
			return "."
		case slash == 0:
			return "/"
		}
		return ep.socketPath[:slash]
	}
	state := env("CLOUDRUNNER_STATE_DIR")
	if state == "" {
		return ""
	}
	if trimmed := strings.TrimRight(state, "/"); trimmed != "" {
		return trimmed
	}
	return "/"
}

func joinDir(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// decision is how the client answers an event no daemon answered, and why.
type decision struct {
	closed       bool
	decidedBy    string // flag, env, policy or no-policy
	notes        []string
	policyDaemon *string
	policyPath   string
}

// envFailClosed reads CLOUDRUNNER_FAIL_CLOSED: 1/true/yes closed, 0/false/no open,
// unset or empty: "" (no say).
func envFailClosed() (string, error) {
	value := env("CLOUDRUNNER_FAIL_CLOSED")
	switch strings.ToLower(value) {
	case "":
		return "", nil
	case "1", "true", "yes":
		return "closed", nil
	case "0", "false", "no":
		return "open", nil
	}
	return "", usageError{fmt.Sprintf("CLOUDRUNNER_FAIL_CLOSED=%s must be 1, true or yes "+
		"(fail closed) or 0, false or no (fail open)", pyRepr(value))}
}

// decide: the flags, then the variable, then the policy file.
func decide(event, flag, envSay, dir string) decision {
	if flag != "" {
		return decision{closed: flag == "closed", decidedBy: "flag"}
	}
	if envSay != "" {
		return decision{closed: envSay == "closed", decidedBy: "env"}
	}
	if dir == "" {
		return decision{decidedBy: "no-policy", notes: []string{"cloudrunner: no fail policy for a " +
			"TCP daemon unless CLOUDRUNNER_STATE_DIR names its state directory; failing open"}}
	}
	path := joinDir(dir, policyName)
	raw, why, err := readPolicy(path)
	if errors.Is(err, syscall.ENOENT) {
		return decision{decidedBy: "no-policy", notes: []string{
			fmt.Sprintf("cloudrunner: no fail policy was published at %s; failing open", path)}}
	}
	if err != nil {
		return unusable(path, osText(err))
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
	d := decision{closed: closed, decidedBy: "policy", policyPath: path}
	if daemon, ok := object["daemon"].(string); ok {
		d.policyDaemon = &daemon
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

func unusable(path, why string) decision {
	return decision{decidedBy: "no-policy", notes: []string{
		fmt.Sprintf("cloudrunner: the fail policy %s is not usable (%s); failing open", path, why)}}
}

// spoolRecord is one fallback.spool line, its fields in the contract's order.
type spoolRecord struct {
	Version        int            `json:"version"`
	Time           string         `json:"time"`
	Event          string         `json:"event"`
	Outcome        string         `json:"outcome"`
	Answer         map[string]any `json:"answer"`
	Problem        string         `json:"problem"`
	DecidedBy      string         `json:"decided_by"`
	PolicyDaemon   *string        `json:"policy_daemon"`
	Client         string         `json:"client"`
	Pid            int            `json:"pid"`
	ConversationID *string        `json:"conversation_id"`
	GenerationID   *string        `json:"generation_id"`
	PayloadSHA256  string         `json:"payload_sha256"`
}

// spoolLine is the JSON Lines record of an event answered without a daemon (<= 4096 bytes).
func spoolLine(event string, answer map[string]any, blocked bool, problem string, d decision, payload []byte) []byte {
	var fields map[string]any
	var conversation, generation *string
	if json.Unmarshal(payload, &fields) == nil {
		if value, ok := fields["conversation_id"].(string); ok {
			value = firstRunes(value, idMaxChars)
			conversation = &value
		}
		if value, ok := fields["generation_id"].(string); ok {
			value = firstRunes(value, idMaxChars)
			generation = &value
		}
	}
	digest := sha256.Sum256(payload)
	outcome := "allowed"
	if blocked {
		outcome = "blocked"
	}
	record := spoolRecord{
		Version: spoolVersion, Time: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		Event: firstRunes(event, idMaxChars), Outcome: outcome, Answer: answer, Problem: problem,
		DecidedBy: d.decidedBy, PolicyDaemon: d.policyDaemon, Client: clientName, Pid: os.Getpid(),
		ConversationID: conversation, GenerationID: generation,
		PayloadSHA256: hex.EncodeToString(digest[:]),
	}
	var line []byte
	for _, limit := range []int{0, 1000, 200} {
		if limit > 0 {
			record.Problem = firstRunes(problem, limit)
			short := map[string]any{}
			for key, value := range answer {
				if text, ok := value.(string); ok {
					value = firstRunes(text, limit)
				}
				short[key] = value
			}
			record.Answer = short
		}
		line = append(compactJSON(record), '\n')
		if len(line) <= spoolLineMaxBytes {
			break
		}
	}
	return line
}

// appendSpool appends the line with one write; the stderr line when it was not recorded.
func appendSpool(dir string, line []byte) string {
	if dir == "" {
		return "cloudrunner: this event is not recorded in a fallback spool (a TCP daemon's " +
			"spool needs CLOUDRUNNER_STATE_DIR)"
	}
	path := joinDir(dir, spoolName)
	notRecorded := func(why string) string {
		return fmt.Sprintf("cloudrunner: cannot write the fallback spool %s (%s); this event is not recorded", path, why)
	}
	// Never through a link planted in the spool's place, and never blocked on a FIFO there.
	flags := syscall.O_WRONLY | syscall.O_APPEND | syscall.O_CREAT | syscall.O_CLOEXEC |
		syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	fd, err := syscall.Open(path, flags, 0o600)
	if err != nil {
		return notRecorded(osText(err))
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return notRecorded(osText(err))
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return notRecorded("not a regular file")
	}
	if st.Size+int64(len(line)) > spoolMaxBytes {
		return fmt.Sprintf("cloudrunner: the fallback spool %s is full (1 MiB); this event is not recorded", path)
	}
	n, err := syscall.Write(fd, line)
	if err != nil {
		return notRecorded(osText(err))
	}
	if n != len(line) {
		return notRecorded("short write")
	}
	return ""
}
