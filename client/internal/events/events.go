// Package events is the client's table of the events that can block, as the daemon's
// event names define them (cloudrunner/protocol/event_names.py): how a block reads, the
// neutral answer, and what an event name may be. tests/unit/client/test_transport.py parses
// this file and checks the table against the Python side's, so the two cannot drift.
package events

// DrainingCode is the error code of a daemon that is shutting down: the event was not
// taken, so it counts as no answer. The same as DRAINING_CODE in cloudrunner/client; a
// Python unit test checks both against the table of error codes.
const DrainingCode = "draining"

// blocking: the events that can block, with how a block reads (the decision field, and
// where its message goes; "" when the event carries no message). The same table as
// BLOCKING_EVENTS in cloudrunner/protocol/event_names.py; a Python unit test
// (tests/unit/client/test_transport.py) checks it against that module and the protocol
// core. One entry a line, as that test reads it.
var blocking = map[string][2]string{
	"beforeMCPExecution":   {"permission", "agent_message"},
	"beforeReadFile":       {"permission", "user_message"},
	"beforeShellExecution": {"permission", "agent_message"},
	"beforeSubmitPrompt":   {"continue", "user_message"},
	"beforeTabFileRead":    {"permission", ""},
	"preToolUse":           {"permission", "agent_message"},
	"subagentStart":        {"permission", "user_message"},
}

// NeutralAnswer is the answer that lets the event through.
func NeutralAnswer(event string) map[string]any {
	switch blocking[event][0] {
	case "permission":
		return map[string]any{"permission": "allow"}
	case "continue":
		return map[string]any{"continue": true}
	}
	return map[string]any{}
}

// BlockedAnswer is the block a failClosed hook would give (neutral where nothing blocks).
func BlockedAnswer(event, message string) map[string]any {
	how, ok := blocking[event]
	if !ok {
		return map[string]any{}
	}
	answer := map[string]any{"permission": "deny"}
	if how[0] == "continue" {
		answer = map[string]any{"continue": false}
	}
	if how[1] != "" {
		answer[how[1]] = message
	}
	return answer
}

// CanBlock: whether the event can block at all.
func CanBlock(event string) bool {
	_, ok := blocking[event]
	return ok
}

// BadName: event names are ASCII letters and digits (they go into the request path).
func BadName(event string) bool {
	if len(event) == 0 || len(event) > 64 {
		return true
	}
	for _, c := range []byte(event) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return true
		}
	}
	return false
}
