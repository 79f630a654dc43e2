package wire

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// serve answers on a unix socket with the handler, or with raw bytes then a close.
func serveUnix(t *testing.T, handler http.HandlerFunc, raw []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.sock")
	listener, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	if handler != nil {
		go http.Serve(listener, handler)
		return path
	}
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 65536)
			conn.Read(buf)
			conn.Write(raw)
			conn.Close()
		}
	}()
	return path
}

func TestRequestSendsWhatThePythonClientSends(t *testing.T) {
	var seen *http.Request
	var body []byte
	path := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		seen = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("X-Cloudrunner-Blocked", "true")
		w.Write([]byte(`{"permission":"deny"}`))
	}, nil)
	answer, err := Request(Endpoint{SocketPath: path, Token: "tok"}, "POST", "/v1/events/preToolUse",
		[]byte(`{"a":1}`), 5, ConnectTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if seen.Host != "cloudrunner" || seen.Header.Get("User-Agent") != "" || seen.URL.Path != "/v1/events/preToolUse" ||
		seen.Header.Get("Content-Type") != "application/json" || seen.Header.Get("Authorization") != "Bearer tok" ||
		!bytes.Equal(body, []byte(`{"a":1}`)) {
		t.Fatalf("request %+v", seen)
	}
	if answer.Status != 200 || !answer.Blocked || string(answer.Body) != `{"permission":"deny"}` {
		t.Fatalf("answer %+v", answer)
	}
}

func TestRequestNamesWhatWentWrong(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"":              "no daemon answers on unix:" + dir + "/none.sock (the socket does not exist)",
		"SSH-2.0-x\r\n": "does not speak HTTP",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}": "dropped the connection (the answer was cut short)",
		"HTTP/1.1 200 OK\r\nContent-Le":                   "closed without an answer",
		"-":                                               "closed without an answer",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n": "sent an answer not " +
			"framed by a Content-Length (chunked, until the close, or a status without a body), as no " +
			"cloudrunner daemon does: not an answer",
	}
	for raw, want := range cases {
		path := filepath.Join(dir, "none.sock")
		if raw != "" {
			path = serveUnix(t, nil, []byte(raw))
		}
		if raw == "-" {
			path = serveUnix(t, nil, nil)
		}
		_, err := Request(Endpoint{SocketPath: path}, "POST", "/v1/events/stop", []byte("{}"), 5, ConnectTimeout)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", raw, err, want)
		}
	}
}
