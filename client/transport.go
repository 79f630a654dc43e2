package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	defaultStateDir = "/var/lib/cloudrunner"
	socketName      = "cloudrunner.sock"
	blockedHeader   = "X-Cloudrunner-Blocked"
)

// endpoint is where the daemon listens: a unix socket, or a TCP host and port with a token.
type endpoint struct {
	socketPath string
	host       string
	port       int
	token      string
}

func (e endpoint) describe() string {
	if e.socketPath != "" {
		return "unix:" + e.socketPath
	}
	return fmt.Sprintf("http://%s:%d", e.host, e.port)
}

// env is a variable, "" when unset (an empty one counts as unset, as in the Python client).
func env(name string) string { return os.Getenv(name) }

// endpointFrom: --socket / --url, else CLOUDRUNNER_SOCKET / CLOUDRUNNER_URL, else the
// default socket in the state directory.
func endpointFrom(socketFlag, urlFlag, tokenFileFlag string) (endpoint, error) {
	raw := urlFlag
	if raw == "" && socketFlag == "" {
		raw = env("CLOUDRUNNER_URL")
	}
	if raw != "" {
		parsed, err := url.Parse(raw)
		// A port that is no number fails the parse; like the Python client, say so only
		// after the token file was read.
		badPort := err != nil && strings.Contains(err.Error(), "invalid port") &&
			strings.HasPrefix(strings.ToLower(raw), "http://")
		if badPort {
			parsed, err = &url.URL{Scheme: "http", Host: "x"}, nil
		}
		if err != nil || parsed.Scheme != "http" || parsed.Hostname() == "" {
			return endpoint{}, usageError{fmt.Sprintf(
				"--url %s must be http://HOST:PORT (the daemon's --listen address)", pyRepr(raw))}
		}
		token := ""
		tokenFile := tokenFileFlag
		if tokenFile == "" {
			tokenFile = env("CLOUDRUNNER_TOKEN_FILE")
		}
		if tokenFile != "" {
			data, err := os.ReadFile(tokenFile)
			if err != nil {
				return endpoint{}, usageError{fmt.Sprintf("cannot read the token file %s (%s)",
					tokenFile, osText(err))}
			}
			if !utf8Valid(data) {
				return endpoint{}, usageError{fmt.Sprintf(
					"cannot read the token file %s (it is not UTF-8 text)", tokenFile)}
			}
			token = strings.TrimSpace(string(data))
			if !bearerTokenOK(token) {
				return endpoint{}, usageError{fmt.Sprintf("the token file %s holds a character "+
					"a bearer token cannot carry (a space, a control character or non-ASCII); "+
					"write the daemon's token there, visible ASCII characters only", tokenFile)}
			}
		}
		if badPort {
			return endpoint{}, usageError{fmt.Sprintf("--url %s has a bad port", pyRepr(raw))}
		}
		port := 80
		if text := parsed.Port(); text != "" {
			port, err = strconv.Atoi(text)
			if err != nil || port < 1 || port > 65535 {
				return endpoint{}, usageError{fmt.Sprintf("--url %s has a bad port", pyRepr(raw))}
			}
		}
		return endpoint{host: strings.ToLower(parsed.Hostname()), port: port, token: token}, nil
	}
	path := socketFlag
	if path == "" {
		path = env("CLOUDRUNNER_SOCKET")
	}
	if path == "" {
		state := env("CLOUDRUNNER_STATE_DIR")
		if state == "" {
			state = defaultStateDir
		}
		if strings.HasSuffix(state, "/") {
			path = state + socketName
		} else {
			path = state + "/" + socketName
		}
	}
	return endpoint{socketPath: path}, nil
}

// unreachable: no daemon answered (no socket, refused, timed out, dropped, not HTTP).
type unreachable struct{ problem string }

func (u unreachable) Error() string { return u.problem }

type reply struct {
	status  int
	blocked bool
	body    []byte
}

// socketPathMaxBytes is the longest unix socket path the kernel takes (sun_path holds
// 108 bytes with its NUL).
const socketPathMaxBytes = 107

var errSocketPathTooLong = errors.New("socket path too long")

func connect(ep endpoint, timeout time.Duration) (net.Conn, error) {
	dialer := net.Dialer{Timeout: timeout}
	if ep.socketPath != "" {
		if len(ep.socketPath) > socketPathMaxBytes {
			return nil, errSocketPathTooLong
		}
		// A full listen backlog answers EAGAIN on a unix socket: wait a little and retry.
		for attempt := 0; ; attempt++ {
			conn, err := dialer.DialContext(context.Background(), "unix", ep.socketPath)
			if err == nil || !errors.Is(err, syscall.EAGAIN) || attempt == 49 {
				return conn, err
			}
			time.Sleep(time.Duration(20*(attempt+1)) * time.Millisecond)
		}
	}
	return dialer.DialContext(context.Background(), "tcp",
		net.JoinHostPort(ep.host, strconv.Itoa(ep.port)))
}

// connectReason says why a connection failed, in the Python client's words.
func connectReason(err error) string {
	var dns *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, errSocketPathTooLong):
		return fmt.Sprintf("the socket path is longer than %d bytes", socketPathMaxBytes)
	case errors.Is(err, syscall.ENOENT):
		return "the socket does not exist"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "name or service not known"
		}
		return "temporary failure in name resolution"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "permission denied on the socket"
	}
	return osText(err)
}

// request makes one HTTP/1.1 request with `Connection: close` over the connection dialled
// here, unix socket or TCP (httpwire.go writes the request and reads the answer).
func request(ep endpoint, method, path string, body []byte, seconds float64, connectTimeout time.Duration) (*reply, error) {
	timeout := time.Duration(seconds * float64(time.Second))
	conn, err := connect(ep, connectTimeout)
	if err != nil {
		return nil, unreachable{fmt.Sprintf("no daemon answers on %s (%s)", ep.describe(), connectReason(err))}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	// Write in the background: the daemon may answer before it has read the whole body
	// (a body over its cap), and that answer is what counts.
	written := make(chan error, 1)
	go func() {
		_, err := (&net.Buffers{withTraceparent(requestHead(method, path, body, ep.token)), body}).WriteTo(conn)
		written <- err
	}()
	return answerFrom(ep, conn, written, seconds, daemonLimits)
}

// answerFrom reads the answer and says what went wrong, in the Python client's words.
func answerFrom(ep endpoint, src io.Reader, written chan error, seconds float64, lim answerLimits) (*reply, error) {
	c := &capped{src: src}
	answer, err := readReply(c, lim)
	var inBody bodyError
	switch {
	case err == nil:
		return answer, nil
	case errors.Is(err, errHeadTooLarge):
		return nil, unreachable{fmt.Sprintf("the daemon on %s sent an answer whose head is over "+
			"%d bytes (a cloudrunner daemon's is a few hundred)", ep.describe(), lim.head)}
	case errors.Is(err, errTooLarge):
		return nil, unreachable{fmt.Sprintf("the daemon on %s sent an answer over %d bytes "+
			"(a cloudrunner daemon's are far smaller)", ep.describe(), lim.total)}
	case errors.As(err, &inBody) && errors.Is(err, io.ErrUnexpectedEOF):
		return nil, unreachable{fmt.Sprintf(
			"the daemon on %s dropped the connection (the answer was cut short)", ep.describe())}
	case errors.As(err, &inBody):
		return nil, readProblem(ep, inBody.err, nil, seconds, nil)
	}
	return nil, readProblem(ep, err, pendingError(written), seconds, c.first)
}

func pendingError(written chan error) error {
	select {
	case err := <-written:
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
			return nil // the daemon may have answered early; the read says what happened
		}
		return err
	default:
		return nil
	}
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// readProblem says why no answer came, in the Python client's words: a head that does not
// start like HTTP is "not HTTP"; one that stops before its blank line was cut short.
func readProblem(ep endpoint, err, writeErr error, seconds float64, head []byte) error {
	var netErr net.Error
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return unreachable{fmt.Sprintf("the daemon on %s did not answer within %ss",
			ep.describe(), formatSeconds(seconds))}
	case writeErr != nil && !errors.Is(writeErr, io.EOF):
		return unreachable{fmt.Sprintf("the daemon on %s dropped the connection (%s)",
			ep.describe(), osText(writeErr))}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return unreachable{fmt.Sprintf("the daemon on %s closed without an answer", ep.describe())}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return unreachable{fmt.Sprintf("the daemon on %s dropped the connection (%s)",
			ep.describe(), osText(err))}
	}
	if len(head) > 0 && bytes.HasPrefix([]byte("HTTP/"), head[:min(len(head), 5)]) &&
		!bytes.Contains(head, []byte("\r\n\r\n")) {
		return unreachable{fmt.Sprintf("the daemon on %s closed without an answer", ep.describe())}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return unreachable{fmt.Sprintf("the daemon on %s dropped the connection (%s)",
			ep.describe(), osText(err))}
	}
	return unreachable{fmt.Sprintf("%s does not speak HTTP", ep.describe())}
}

// bearerTokenOK: a token travels in an HTTP header, so visible ASCII characters only (no
// space, no control character that could end the header and start another).
func bearerTokenOK(token string) bool {
	for i := 0; i < len(token); i++ {
		if token[i] < '!' || token[i] > '~' {
			return false
		}
	}
	return true
}
