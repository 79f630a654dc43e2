package main

// drainingCode is the error code of a daemon that is shutting down: the event was not
// taken, so it counts as no answer. The same as DRAINING_CODE in cloudrunner/client.py; a
// Python unit test checks both against the table of error codes.
const drainingCode = "draining"

// blockingEvents: the events that can block, with how a block reads (the decision field,
// and where its message goes; "" when the event carries no message). The same table as
// BLOCKING_EVENTS in cloudrunner/client.py; a Python unit test checks both against the
// protocol core.
var blockingEvents = map[string][2]string{
	"beforeMCPExecution":   {"permission", "agent_message"},
	"beforeReadFile":       {"permission", "user_message"},
	"beforeShellExecution": {"permission", "agent_message"},
	"beforeSubmitPrompt":   {"continue", "user_message"},
	"beforeTabFileRead":    {"permission", ""},
	"preToolUse":           {"permission", "agent_message"},
	"subagentStart":        {"permission", "user_message"},
}

// neutralAnswer is the answer that lets the event through.
func neutralAnswer(event string) map[string]any {
	switch blockingEvents[event][0] {
	case "permission":
		return map[string]any{"permission": "allow"}
	case "continue":
		return map[string]any{"continue": true}
	}
	return map[string]any{}
}

// blockedAnswer is the block a failClosed hook would give (neutral where nothing blocks).
func blockedAnswer(event, message string) map[string]any {
	how, ok := blockingEvents[event]
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

// badEventName: event names are ASCII letters and digits (they go into the request path).
func badEventName(event string) bool {
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
