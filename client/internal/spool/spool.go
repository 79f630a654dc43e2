// Package spool appends each event answered without a daemon to the fallback spool in the
// daemon's state directory (bounded; the daemon records each line in the audit log as a
// `fallback` record when it next starts): the contract shared with the Python client,
// cloudrunner/client_fallback.py.
package spool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"cloudrunner.invalid/cloudrunner-hook/internal/policy"
	"cloudrunner.invalid/cloudrunner-hook/internal/text"
)

const (
	spoolName         = "fallback.spool"
	spoolVersion      = 1
	spoolMaxBytes     = 1024 * 1024
	spoolLineMaxBytes = 4096
	clientName        = "cloudrunner-hook"
	idMaxChars        = 200
)

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

// Line is the JSON Lines record of an event answered without a daemon (<= 4096 bytes).
func Line(event string, answer map[string]any, blocked bool, problem string, d policy.Decision, payload []byte) []byte {
	var fields map[string]any
	var conversation, generation *string
	if json.Unmarshal(payload, &fields) == nil {
		if value, ok := fields["conversation_id"].(string); ok {
			value = text.FirstRunes(value, idMaxChars)
			conversation = &value
		}
		if value, ok := fields["generation_id"].(string); ok {
			value = text.FirstRunes(value, idMaxChars)
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
		Event: text.FirstRunes(event, idMaxChars), Outcome: outcome, Answer: answer, Problem: problem,
		DecidedBy: d.DecidedBy, PolicyDaemon: d.PolicyDaemon, Client: clientName, Pid: os.Getpid(),
		ConversationID: conversation, GenerationID: generation,
		PayloadSHA256: hex.EncodeToString(digest[:]),
	}
	var line []byte
	for _, limit := range []int{0, 1000, 200} {
		if limit > 0 {
			record.Problem = text.FirstRunes(problem, limit)
			short := map[string]any{}
			for key, value := range answer {
				if s, ok := value.(string); ok {
					value = text.FirstRunes(s, limit)
				}
				short[key] = value
			}
			record.Answer = short
		}
		line = append(text.CompactJSON(record), '\n')
		if len(line) <= spoolLineMaxBytes {
			break
		}
	}
	return line
}

// Append appends the line with one write; the stderr line when it was not recorded.
func Append(dir string, line []byte) string {
	if dir == "" {
		return "cloudrunner: this event is not recorded in a fallback spool (a TCP daemon's " +
			"spool needs CLOUDRUNNER_STATE_DIR)"
	}
	path := policy.JoinDir(dir, spoolName)
	notRecorded := func(why string) string {
		return fmt.Sprintf("cloudrunner: cannot write the fallback spool %s (%s); this event is not recorded", path, why)
	}
	// Never through a link planted in the spool's place, and never blocked on a FIFO there.
	flags := syscall.O_WRONLY | syscall.O_APPEND | syscall.O_CREAT | syscall.O_CLOEXEC |
		syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	fd, err := syscall.Open(path, flags, 0o600)
	if err != nil {
		return notRecorded(text.OSText(err))
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return notRecorded(text.OSText(err))
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return notRecorded("not a regular file")
	}
	if st.Size+int64(len(line)) > spoolMaxBytes {
		return fmt.Sprintf("cloudrunner: the fallback spool %s is full (1 MiB); this event is not recorded", path)
	}
	n, err := syscall.Write(fd, line)
	if err != nil {
		return notRecorded(text.OSText(err))
	}
	if n != len(line) {
		return notRecorded("short write")
	}
	return ""
}
