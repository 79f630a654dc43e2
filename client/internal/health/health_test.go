package health

import (
	"strings"
	"testing"
)

func TestVersionMismatchSaysOneLineOnlyWhenTheVersionsDiffer(t *testing.T) {
	advice := "; use one version of both (cloudrunner --version, cloudrunner-hook --version)"
	cases := map[string]string{
		`{"status":"ok","version":"0.1.0","commit":"abc"}`: "",
		`{"status":"ok","version":"0.2.0","commit":"0123456789ab"}`: "cloudrunner: the daemon is " +
			"version 0.2.0 (commit 0123456789ab) and this client 0.1.0" + advice,
		`{"status":"ok","version":"0.2.0","commit":"a\nb"}`: "cloudrunner: the daemon is " +
			"version 0.2.0 (commit unknown) and this client 0.1.0" + advice,
		`{"status":"ok"}`: "cloudrunner: the daemon does not say its version (it is older " +
			"than this client, 0.1.0)" + advice,
		`{"version":"0.2.0\u001b[2J"}`: "cloudrunner: the daemon does not say its version (it " +
			"is older than this client, 0.1.0)" + advice,
		`{"version":7}`: "cloudrunner: the daemon does not say its version (it is older " +
			"than this client, 0.1.0)" + advice,
		`["version"]`: "cloudrunner: the daemon does not say its version (it is older " +
			"than this client, 0.1.0)" + advice,
		`not json`: "cloudrunner: the daemon does not say its version (it is older " +
			"than this client, 0.1.0)" + advice,
		`{"version":"` + strings.Repeat("9", 65) + `"}`: "cloudrunner: the daemon does not say " +
			"its version (it is older than this client, 0.1.0)" + advice,
	}
	for body, want := range cases {
		if got := VersionMismatch([]byte(body), "0.1.0"); got != want {
			t.Errorf("%s:\n got %q\nwant %q", body, got, want)
		}
	}
	if got := VersionMismatch([]byte(`{"status":"ok"}`), "unknown"); got != "" {
		t.Errorf("a binary built without a version compared itself: %q", got)
	}
}
