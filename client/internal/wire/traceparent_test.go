package wire

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

const validTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestTraceparentShape(t *testing.T) {
	for _, good := range []string{validTraceparent, "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-later"} {
		if !traceparentShape(good) {
			t.Errorf("%q refused", good)
		}
	}
	for _, bad := range []string{
		"", "garbage", strings.ToUpper(validTraceparent), validTraceparent + "-extra",
		"ff" + validTraceparent[2:], validTraceparent + "\r\nX-Injected: 1",
		strings.Replace(validTraceparent, "-", "_", -1), "00-" + strings.Repeat("a", 600),
		"00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
	} {
		if traceparentShape(bad) {
			t.Errorf("%q taken", bad)
		}
	}
}

// With TRACEPARENT set, the head is what net/http wrote with the header set; without (or
// malformed), the head is unchanged.
func TestWithTraceparentIsWhatNetHTTPWrote(t *testing.T) {
	head := requestHead("POST", "/v1/events/stop", []byte("{}"), "tok")
	t.Setenv("TRACEPARENT", "  "+validTraceparent+"\t")
	req, _ := http.NewRequest("POST", "http://cloudrunner/v1/events/stop", strings.NewReader("{}"))
	req.Host, req.Close = "cloudrunner", true
	req.Header.Set("User-Agent", "")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Traceparent", validTraceparent)
	var want bytes.Buffer
	if err := req.Write(&want); err != nil {
		t.Fatal(err)
	}
	if got := append(withTraceparent(head), "{}"...); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("got %q\nwant %q", got, want.Bytes())
	}
	t.Setenv("TRACEPARENT", validTraceparent+"\r\nX-Injected: 1")
	if got := withTraceparent(head); !bytes.Equal(got, head) {
		t.Errorf("a malformed TRACEPARENT changed the head: %q", got)
	}
}
