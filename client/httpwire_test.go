package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// The answers and problem lines must be the ones the client gave when net/http read the
// answer: netHTTPAnswer is that reading (ReadResponse, then the whole body), said the way the
// client said it then; the hand-written reader is checked against it.

var testEndpoint = endpoint{socketPath: "/run/d.sock"}

type recorder struct {
	src  io.Reader
	data []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.src.Read(p)
	if room := 64*1024 - len(r.data); room > 0 {
		r.data = append(r.data, p[:min(n, room)]...)
	}
	return n, err
}

func netHTTPAnswer(raw []byte) (*reply, error) {
	head := &recorder{src: bytes.NewReader(raw)}
	req, _ := http.NewRequest("POST", "http://cloudrunner/v1/events/stop", nil)
	resp, err := http.ReadResponse(bufio.NewReaderSize(head, 16*1024), req)
	if err != nil {
		return nil, readProblem(testEndpoint, err, nil, 5, head.data)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, unreachable{fmt.Sprintf(
				"the daemon on %s dropped the connection (the answer was cut short)", testEndpoint.describe())}
		}
		return nil, readProblem(testEndpoint, err, nil, 5, nil)
	}
	return &reply{status: resp.StatusCode, blocked: resp.Header.Get(blockedHeader) == "true", body: data}, nil
}

// countingReader counts what the reader under test took from the connection.
type countingReader struct {
	src  io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.src.Read(p)
	c.read += n
	return n, err
}

func handAnswer(raw []byte, lim answerLimits) (*reply, error, int) {
	src := &countingReader{src: bytes.NewReader(raw)}
	answer, err := answerFrom(testEndpoint, src, make(chan error, 1), 5, lim)
	return answer, err, src.read
}

func outcome(answer *reply, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%d blocked=%v body=%q", answer.status, answer.blocked, answer.body)
}

func tooLarge(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "sent an answer over") ||
		strings.Contains(err.Error(), "sent an answer whose head is over"))
}

var small = answerLimits{head: 1024, total: 4096}

func TestReadReplyAnswersAsNetHTTPDid(t *testing.T) {
	big := strings.Repeat("x", 40*1024)
	cases := []struct{ name, raw, want string }{
		{"normal", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}",
			`200 blocked=false body="{}"`},
		{"blocked", "HTTP/1.1 200 OK\r\nx-cloudrunner-blocked: true\r\nContent-Length: 21\r\n\r\n" +
			`{"permission":"deny"}`, `200 blocked=true body="{\"permission\":\"deny\"}"`},
		{"refused", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 49\r\n\r\n" +
			`{"error":{"code":"draining","message":"closing"}}`,
			`503 blocked=false body="{\"error\":{\"code\":\"draining\",\"message\":\"closing\"}}"`},
		{"until the close", "HTTP/1.0 200 OK\r\n\r\n{\"a\":1}", `200 blocked=false body="{\"a\":1}"`},
		{"HTTP/1.1 until the close", "HTTP/1.1 200 OK\r\n\r\n{}", `200 blocked=false body="{}"`},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\n{\"\r\n" +
			"9\r\na\":12345}\r\n0\r\n\r\n", `200 blocked=false body="{\"a\":12345}"`},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nTrailer: X-T\r\n\r\n" +
			"2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n", `200 blocked=false body="{}"`},
		{"chunked overrides the length", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", `200 blocked=false body="{}"`},
		{"no body on 204", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello", `204 blocked=false body=""`},
		{"LF-only lines", "HTTP/1.1 200 OK\nContent-Length: 2\n\n{}", `200 blocked=false body="{}"`},
		{"bytes after the body", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 500 no\r\n\r\n",
			`200 blocked=false body="{}"`},
		{"folded header", "HTTP/1.1 200 OK\r\nX-Cloudrunner-Blocked: tr\r\n ue\r\nContent-Length: 0\r\n\r\n",
			`200 blocked=false body=""`},
		{"same length twice", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length:  2 \r\n\r\n{}",
			`200 blocked=false body="{}"`},
		{"long header under the cap", "HTTP/1.1 200 OK\r\nX-Big: " + big + "\r\nContent-Length: 2\r\n\r\n{}",
			`200 blocked=false body="{}"`},
		{"HTTP/1.0 ignores Transfer-Encoding", "HTTP/1.0 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}",
			`200 blocked=false body="{}"`},
		{"status with a plus", "HTTP/1.1 +20 OK\r\nContent-Length: 0\r\n\r\n", `20 blocked=false body=""`},

		{"nothing", "", "closed without an answer"},
		{"not HTTP", "SSH-2.0-OpenSSH_9.2\r\n\r\n", "unix:/run/d.sock does not speak HTTP"},
		{"a bad status code", "HTTP/1.1 2000 OK\r\n\r\n", "does not speak HTTP"},
		{"a negative status code", "HTTP/1.1 -20 OK\r\n\r\n", "does not speak HTTP"},
		{"a bad version", "HTTP/x 200 OK\r\n\r\n", "does not speak HTTP"},
		{"no space", "HTTP/1.1\r\n\r\n", "does not speak HTTP"},
		{"a status line then the close", "HTTP/1.1 200 OK\r\nContent-Le", "closed without an answer"},
		{"a bad status line then the close", "HTTP/1.1 abc\r\n", "closed without an answer"},
		{"a header without a colon", "HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "does not speak HTTP"},
		{"a length that lies", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
			"dropped the connection (the answer was cut short)"},
		{"a length and no body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", "the answer was cut short"},
		{"a negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}", "does not speak HTTP"},
		{"an overflowing length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n{}",
			"does not speak HTTP"},
		{"a length past 2^63", "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n{}",
			"does not speak HTTP"},
		{"a huge length", "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n{}",
			"the answer was cut short"},
		{"a length in hex", "HTTP/1.1 200 OK\r\nContent-Length: 0x2\r\n\r\n{}", "does not speak HTTP"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x", "does not speak HTTP"},
		{"an unknown encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}", "does not speak HTTP"},
		{"two encodings", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
			"does not speak HTTP"},
		{"a forbidden trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: a, content-length\r\n\r\n",
			"does not speak HTTP"},
		{"a chunk size not hex", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "does not speak HTTP"},
		{"a negative chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\n{}\r\n0\r\n\r\n",
			"does not speak HTTP"},
		{"a 17-digit chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"00000000000000002\r\n{}\r\n0\r\n\r\n", "does not speak HTTP"},
		{"a chunk size line too long", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;" +
			strings.Repeat("e", 5000) + "\r\n{}\r\n0\r\n\r\n", "does not speak HTTP"},
		{"a chunk longer than its data", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n{}",
			"the answer was cut short"},
		{"a chunk without its CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}xx0\r\n\r\n",
			"does not speak HTTP"},
		{"chunks without their end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
			"the answer was cut short"},
		{"the last chunk then the close", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n",
			"does not speak HTTP"},
		{"a trailer without its end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n",
			"does not speak HTTP"},
		{"LF-only chunks", "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n2\n{}\n0\n\n", "does not speak HTTP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answer, err, _ := handAnswer([]byte(c.raw), daemonLimits)
			got := outcome(answer, err)
			if !strings.Contains(got, c.want) {
				t.Errorf("got %s, want %s", got, c.want)
			}
			if was := outcome(netHTTPAnswer([]byte(c.raw))); was != got {
				t.Errorf("net/http said %s, the hand-written reader %s", was, got)
			}
		})
	}
}

func TestReadReplyStopsAtItsLimits(t *testing.T) {
	body := strings.Repeat("b", 10*1024)
	cases := []struct{ name, raw, want string }{
		{"a huge header", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("h", 100*1024) + "\r\n\r\n{}",
			"sent an answer whose head is over 1024 bytes (a cloudrunner daemon's is a few hundred)"},
		{"endless headers", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: 1\r\n", 1000), "head is over 1024 bytes"},
		{"a body over the cap", "HTTP/1.1 200 OK\r\nContent-Length: 10240\r\n\r\n" + body,
			"sent an answer over 4096 bytes (a cloudrunner daemon's are far smaller)"},
		{"a body over the cap until the close", "HTTP/1.1 200 OK\r\n\r\n" + body, "sent an answer over 4096 bytes"},
		{"chunks over the cap", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2800\r\n" + body + "\r\n0\r\n\r\n",
			"sent an answer over 4096 bytes"},
		{"a trailer over the cap", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: " + body,
			"sent an answer over 4096 bytes"},
		{"a body at the cap", "HTTP/1.1 200 OK\r\n\r\n" + strings.Repeat("b", 4096-19), "200 blocked=false"},
		{"a body one past the cap", "HTTP/1.1 200 OK\r\n\r\n" + strings.Repeat("b", 4096-18), "sent an answer over 4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answer, err, read := handAnswer([]byte(c.raw), small)
			if got := outcome(answer, err); !strings.Contains(got, c.want) {
				t.Errorf("got %s, want %s", got, c.want)
			}
			if read > int(small.total)+1 {
				t.Errorf("read %d bytes, over the limit of %d", read, small.total)
			}
		})
	}
}

// The head written is the one net/http's Request.Write wrote for the same request.
func TestRequestHeadIsWhatNetHTTPWrote(t *testing.T) {
	for _, c := range []struct {
		method, path, body, token string
	}{
		{"POST", "/v1/events/stop", `{"a":1}`, ""},
		{"POST", "/v1/events/preToolUse", `{}`, "tok-123"},
		{"POST", "/v1/events/stop", "", ""},
		{"GET", "/healthz", "", ""},
		{"GET", "/readyz", "", "tok"},
		{"POST", "/v1/events/stop", "{}", "a\r\nX-Injected: 1"},
		{"POST", "/v1/events/stop", "{}", "\x01\xff tok \t"},
	} {
		req, err := http.NewRequest(c.method, "http://cloudrunner"+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "cloudrunner"
		req.Close = true
		req.Header.Set("User-Agent", "")
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		var want bytes.Buffer
		if err := req.Write(&want); err != nil {
			t.Fatal(err)
		}
		got := append(requestHead(c.method, c.path, []byte(c.body), c.token), c.body...)
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%+v:\n got %q\nwant %q", c, got, want.Bytes())
		}
	}
}

// FuzzReadReply: on any bytes the reader neither panics nor takes more than its limit, and
// under the daemon's limits it says what net/http's reading said.
func FuzzReadReply(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n2;e\r\n{}\r\n0\r\nX: 1\r\n\r\n",
		"HTTP/1.0 503 x\nx-cloudrunner-blocked: true\n\n{}",
		"HTTP/1.1 204 \r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"SSH-2.0-x\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		answer, err, read := handAnswer(raw, small)
		if read > int(small.total)+1 {
			t.Fatalf("read %d bytes, over the limit of %d", read, small.total)
		}
		if err == nil && len(answer.body) > int(small.total) {
			t.Fatalf("a body of %d bytes, over the limit of %d", len(answer.body), small.total)
		}
		var problem unreachable
		if err != nil && !errors.As(err, &problem) {
			t.Fatalf("an error that is no problem line: %v", err)
		}
		answer, err, _ = handAnswer(raw, daemonLimits)
		got := outcome(answer, err)
		if was := outcome(netHTTPAnswer(raw)); !tooLarge(err) && was != got {
			t.Fatalf("net/http said %s, the hand-written reader %s", was, got)
		}
	})
}

// The point of httpwire.go: the binary must not link net/http (or what it drags in) again.
func TestTheBinaryDoesNotImportNetHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "net/http" || pkg == "crypto/tls" || pkg == "crypto/x509" || pkg == "mime" {
			t.Errorf("the client imports %s; its start-up then costs every event", pkg)
		}
	}
}
