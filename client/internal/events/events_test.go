package events

import (
	"strings"
	"testing"
)

func TestEventNamesAreLettersAndDigits(t *testing.T) {
	for _, bad := range []string{"", "a b", "../x", "x HTTP/1.1\r\nAuthorization: y", strings.Repeat("a", 65), "é"} {
		if !BadName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	if BadName("beforeShellExecution") {
		t.Error("a real event refused")
	}
}

func TestABlockReadsAsTheEventSays(t *testing.T) {
	if got := BlockedAnswer("beforeSubmitPrompt", "down"); got["continue"] != false || got["user_message"] != "down" {
		t.Errorf("beforeSubmitPrompt: %v", got)
	}
	if got := BlockedAnswer("beforeTabFileRead", "down"); len(got) != 1 || got["permission"] != "deny" {
		t.Errorf("beforeTabFileRead carries no message: %v", got)
	}
	if got := BlockedAnswer("stop", "down"); len(got) != 0 || CanBlock("stop") {
		t.Errorf("stop cannot block: %v", got)
	}
	if got := NeutralAnswer("preToolUse"); got["permission"] != "allow" {
		t.Errorf("preToolUse: %v", got)
	}
}
