package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// What the reader takes (an answer with a Content-Length) it must read as the client did when
// net/http read the answer: netHTTPAnswer is that reading (ReadResponse, then the whole body),
// said the way the client said it then; the hand-written reader is checked against it.

var testEndpoint = Endpoint{SocketPath: "/run/d.sock"}

// notAnAnswer is the one line for an answer framed otherwise than a daemon frames it.
const notAnAnswer = "the daemon on unix:/run/d.sock sent an answer not framed by a " +
	"Content-Length (chunked, until the close, or a status without a body), as no cloudrunner " +
	"daemon does: not an answer"

type recorder struct {
	src  io.Reader
	data []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.src.Read(p)
	if room := 64*1024 - len(r.data); room > 0 {
		r.data = append(r.data, p[:minInt(n, room)]...)
	}
	return n, err
}

func netHTTPAnswer(raw []byte) (*Reply, error) {
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
				"the daemon on %s dropped the connection (the answer was cut short)", testEndpoint.Describe())}
		}
		return nil, readProblem(testEndpoint, err, nil, 5, nil)
	}
	return &Reply{Status: resp.StatusCode, Blocked: resp.Header.Get(blockedHeader) == "true", Body: data}, nil
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

func handAnswer(raw []byte, lim limits) (*Reply, int, error) {
	src := &countingReader{src: bytes.NewReader(raw)}
	answer, err := answerFrom(testEndpoint, src, make(chan error, 1), 5, lim)
	return answer, src.read, err
}

func outcome(answer *Reply, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%d blocked=%v body=%q", answer.Status, answer.Blocked, answer.Body)
}

func tooLarge(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "sent an answer over") ||
		strings.Contains(err.Error(), "sent an answer whose head is over"))
}

var small = limits{head: 1024, total: 4096}

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
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}", `200 blocked=false body="{\"a\":1}"`},
		{"LF-only lines", "HTTP/1.1 200 OK\nContent-Length: 2\n\n{}", `200 blocked=false body="{}"`},
		{"bytes after the body", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 500 no\r\n\r\n",
			`200 blocked=false body="{}"`},
		{"folded header", "HTTP/1.1 200 OK\r\nX-Cloudrunner-Blocked: tr\r\n ue\r\nContent-Length: 0\r\n\r\n",
			`200 blocked=false body=""`},
		{"same length twice", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length:  2 \r\n\r\n{}",
			`200 blocked=false body="{}"`},
		{"long header under the cap", "HTTP/1.1 200 OK\r\nX-Big: " + big + "\r\nContent-Length: 2\r\n\r\n{}",
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answer, _, err := handAnswer([]byte(c.raw), daemonLimits)
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

// A cloudrunner daemon always sends a Content-Length: an answer framed any other way
// (chunked, with trailers, until the close, no length on any status, a status that has no
// body) is not an answer, in one line, whatever its body would have been; so is a
// Transfer-Encoding beside a length.
func TestAnAnswerWithoutAContentLengthIsNotAnAnswer(t *testing.T) {
	for name, raw := range map[string]string{
		"chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\n{\"\r\n" +
			"9\r\na\":12345}\r\n0\r\n\r\n",
		"chunked with a trailer": "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nTrailer: X-T\r\n\r\n" +
			"2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n",
		"chunked beside a length": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"chunks cut short":              "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
		"an unknown encoding":           "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}",
		"HTTP/1.0 with an encoding":     "HTTP/1.0 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/0.0 chunked":              "HTTP/0.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"until the close":               "HTTP/1.0 200 OK\r\n\r\n{\"a\":1}",
		"HTTP/1.1 until the close":      "HTTP/1.1 200 OK\r\n\r\n{}",
		"an empty length":               "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n{}",
		"a blocked answer without one":  "HTTP/1.1 200 OK\r\nX-Cloudrunner-Blocked: true\r\n\r\n{\"permission\":\"deny\"}",
		"a 204 without one":             "HTTP/1.1 204 No Content\r\n\r\n",
		"a 204 with one":                "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello",
		"a 304 with one":                "HTTP/1.1 304 Not Modified\r\nContent-Length: 0\r\n\r\n",
		"a 100 with one":                "HTTP/1.1 100 Continue\r\nContent-Length: 2\r\n\r\n{}",
		"a refusal without one":         "HTTP/1.1 503 Service Unavailable\r\n\r\n{\"error\":{}}",
		"nothing after the head":        "HTTP/1.1 200 OK\r\n\r\n",
		"an endless body without one":   "HTTP/1.1 200 OK\r\n\r\n" + strings.Repeat("b", 10*1024),
		"a chunk size line too long":    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;" + strings.Repeat("e", 5000),
		"a forbidden trailer":           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: content-length\r\n\r\n",
		"two encodings":                 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"an encoding without its value": "HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\nContent-Length: 2\r\n\r\n{}",
	} {
		for _, lim := range []limits{daemonLimits, small} {
			answer, read, err := handAnswer([]byte(raw), lim)
			if got := outcome(answer, err); got != "error: "+notAnAnswer {
				t.Errorf("%s: got %s", name, got)
			}
			if head := strings.Index(raw, "\r\n\r\n") + 4; read > head+answerBufferBytes {
				t.Errorf("%s: read %d bytes, past the head and one buffer", name, read)
			}
		}
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
		{"a length over the cap, the body short", "HTTP/1.1 200 OK\r\nContent-Length: 999999\r\n\r\n" + body,
			"sent an answer over 4096 bytes"},
		// the head "HTTP/1.1 200 OK\r\nContent-Length: NNNN\r\n\r\n" is 41 bytes
		{"a body at the cap", "HTTP/1.1 200 OK\r\nContent-Length: 4055\r\n\r\n" + strings.Repeat("b", 4055),
			"200 blocked=false"},
		{"a body one past the cap", "HTTP/1.1 200 OK\r\nContent-Length: 4056\r\n\r\n" + strings.Repeat("b", 4056),
			"sent an answer over 4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answer, read, err := handAnswer([]byte(c.raw), small)
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

// framedByLength: whether the head (read by textproto, apart from the reader under test)
// frames its body as a daemon does: a non-empty Content-Length and no Transfer-Encoding, on a
// status whose body net/http reads (not 1xx, 204 or 304).
func framedByLength(raw []byte) bool {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	line, err := tp.ReadLine()
	if err != nil {
		return false
	}
	header, err := tp.ReadMIMEHeader()
	if err != nil {
		return false
	}
	_, chunked := header["Transfer-Encoding"]
	fields := strings.Fields(line)
	bodiless := len(fields) > 1 && (strings.HasPrefix(fields[1], "1") || fields[1] == "204" || fields[1] == "304")
	return !chunked && !bodiless && textproto.TrimString(header.Get("Content-Length")) != ""
}

// FuzzReadReply: on any bytes the reader neither panics nor takes more than its limit; an
// answer framed by its length it reads as net/http did, and one framed otherwise is either
// not an answer or refused for the same reason net/http refused it.
func FuzzReadReply(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n2;e\r\n{}\r\n0\r\nX: 1\r\n\r\n",
		"HTTP/1.0 503 x\nx-cloudrunner-blocked: true\n\n{}",
		"HTTP/1.1 204 \r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}",
		"SSH-2.0-x\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		answer, read, err := handAnswer(raw, small)
		if read > int(small.total)+1 {
			t.Fatalf("read %d bytes, over the limit of %d", read, small.total)
		}
		if err == nil && len(answer.Body) > int(small.total) {
			t.Fatalf("a body of %d bytes, over the limit of %d", len(answer.Body), small.total)
		}
		var problem unreachable
		if err != nil && !errors.As(err, &problem) {
			t.Fatalf("an error that is no problem line: %v", err)
		}
		answer, _, err = handAnswer(raw, daemonLimits)
		got := outcome(answer, err)
		if tooLarge(err) {
			return
		}
		was := outcome(netHTTPAnswer(raw))
		if framedByLength(raw) && was != got {
			t.Fatalf("net/http said %s, the hand-written reader %s", was, got)
		}
		if !framedByLength(raw) && was != got && got != "error: "+notAnAnswer {
			t.Fatalf("no length: net/http said %s, the hand-written reader %s", was, got)
		}
		if got == "error: "+notAnAnswer && framedByLength(raw) {
			t.Fatalf("an answer framed by its length refused: %q", raw)
		}
	})
}
