// Package wire is the client's one exchange with the daemon: where it listens (Endpoint,
// from the flags and variables), one HTTP/1.1 request over a unix socket or TCP, and the
// answer read as a cloudrunner daemon sends it (reader.go); what went wrong is said in the
// Python client's words.
package wire

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
	"unicode/utf8"

	"cloudrunner.invalid/cloudrunner-hook/internal/text"
)

// ConnectTimeout bounds connecting to the daemon for an event.
const ConnectTimeout = 5 * time.Second

const (
	defaultStateDir = "/var/lib/cloudrunner"
	socketName      = "cloudrunner.sock"
	blockedHeader   = "X-Cloudrunner-Blocked"
)

// Endpoint is where the daemon listens: a unix socket, or a TCP host and port with a token.
type Endpoint struct {
	SocketPath string
	Host       string
	Port       int
	Token      string
}

// Describe is the endpoint as the client's lines name it.
func (e Endpoint) Describe() string {
	if e.SocketPath != "" {
		return "unix:" + e.SocketPath
	}
	return fmt.Sprintf("http://%s:%d", e.Host, e.Port)
}

// env is a variable, "" when unset (an empty one counts as unset, as in the Python client).
func env(name string) string { return os.Getenv(name) }

// EndpointFrom: --socket / --url, else CLOUDRUNNER_SOCKET / CLOUDRUNNER_URL, else the
// default socket in the state directory. Its errors are usage errors, said as they are.
func EndpointFrom(socketFlag, urlFlag, tokenFileFlag string) (Endpoint, error) {
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
			return Endpoint{}, fmt.Errorf(
				"--url %s must be http://HOST:PORT (the daemon's --listen address)", text.PyRepr(raw))
		}
		token := ""
		tokenFile := tokenFileFlag
		if tokenFile == "" {
			tokenFile = env("CLOUDRUNNER_TOKEN_FILE")
		}
		if tokenFile != "" {
			data, err := os.ReadFile(tokenFile)
			if err != nil {
				return Endpoint{}, fmt.Errorf("cannot read the token file %s (%s)",
					tokenFile, text.OSText(err))
			}
			if !utf8.Valid(data) {
				return Endpoint{}, fmt.Errorf(
					"cannot read the token file %s (it is not UTF-8 text)", tokenFile)
			}
			token = strings.TrimSpace(string(data))
			if !bearerTokenOK(token) {
				return Endpoint{}, fmt.Errorf("the token file %s holds a character "+
					"a bearer token cannot carry (a space, a control character or non-ASCII); "+
					"write the daemon's token there, visible ASCII characters only", tokenFile)
			}
		}
		if badPort {
			return Endpoint{}, fmt.Errorf("--url %s has a bad port", text.PyRepr(raw))
		}
		port := 80
		if portText := parsed.Port(); portText != "" {
			port, err = strconv.Atoi(portText)
			if err != nil || port < 1 || port > 65535 {
				return Endpoint{}, fmt.Errorf("--url %s has a bad port", text.PyRepr(raw))
			}
		}
		return Endpoint{Host: strings.ToLower(parsed.Hostname()), Port: port, Token: token}, nil
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
	return Endpoint{SocketPath: path}, nil
}

// unreachable: no daemon answered (no socket, refused, timed out, dropped, not HTTP).
type unreachable struct{ problem string }

func (u unreachable) Error() string { return u.problem }

// Reply is the daemon's answer: its status, its X-Cloudrunner-Blocked header, its body.
type Reply struct {
	Status  int
	Blocked bool
	Body    []byte
}

// socketPathMaxBytes is the longest unix socket path the kernel takes (sun_path holds
// 108 bytes with its NUL).
const socketPathMaxBytes = 107

var errSocketPathTooLong = errors.New("socket path too long")

func connect(ep Endpoint, timeout time.Duration) (net.Conn, error) {
	dialer := net.Dialer{Timeout: timeout}
	if ep.SocketPath != "" {
		if len(ep.SocketPath) > socketPathMaxBytes {
			return nil, errSocketPathTooLong
		}
		// A full listen backlog answers EAGAIN on a unix socket: wait a little and retry.
		for attempt := 0; ; attempt++ {
			conn, err := dialer.DialContext(context.Background(), "unix", ep.SocketPath)
			if err == nil || !errors.Is(err, syscall.EAGAIN) || attempt == 49 {
				return conn, err
			}
			time.Sleep(time.Duration(20*(attempt+1)) * time.Millisecond)
		}
	}
	return dialer.DialContext(context.Background(), "tcp",
		net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port)))
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
	return text.OSText(err)
}

// Request makes one HTTP/1.1 request with `Connection: close` over the connection dialled
// here, unix socket or TCP (httpwire.go writes the request and reads the answer).
func Request(ep Endpoint, method, path string, body []byte, seconds float64, connectTimeout time.Duration) (*Reply, error) {
	timeout := time.Duration(seconds * float64(time.Second))
	conn, err := connect(ep, connectTimeout)
	if err != nil {
		return nil, unreachable{fmt.Sprintf("no daemon answers on %s (%s)", ep.Describe(), connectReason(err))}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	// Write in the background: the daemon may answer before it has read the whole body
	// (a body over its cap), and that answer is what counts.
	written := make(chan error, 1)
	go func() {
		_, err := (&net.Buffers{withTraceparent(requestHead(method, path, body, ep.Token)), body}).WriteTo(conn)
		written <- err
	}()
	return answerFrom(ep, conn, written, seconds, daemonLimits)
}

// answerFrom reads the answer and says what went wrong, in the Python client's words.
func answerFrom(ep Endpoint, src io.Reader, written chan error, seconds float64, lim limits) (*Reply, error) {
	c := &capped{src: src}
	answer, err := readReply(c, lim)
	var inBody bodyError
	switch {
	case err == nil:
		return answer, nil
	case errors.Is(err, errHeadTooLarge):
		return nil, unreachable{fmt.Sprintf("the daemon on %s sent an answer whose head is over "+
			"%d bytes (a cloudrunner daemon's is a few hundred)", ep.Describe(), lim.head)}
	case errors.Is(err, errNoLength):
		return nil, unreachable{fmt.Sprintf("the daemon on %s sent an answer not framed "+
			"by a Content-Length (chunked, until the close, or a status without a body), as no "+
			"cloudrunner daemon does: not an answer", ep.Describe())}
	case errors.Is(err, errTooLarge):
		return nil, unreachable{fmt.Sprintf("the daemon on %s sent an answer over %d bytes "+
			"(a cloudrunner daemon's are far smaller)", ep.Describe(), lim.total)}
	case errors.As(err, &inBody) && errors.Is(err, io.ErrUnexpectedEOF):
		return nil, unreachable{fmt.Sprintf(
			"the daemon on %s dropped the connection (the answer was cut short)", ep.Describe())}
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

// readProblem says why no answer came, in the Python client's words: a head that does not
// start like HTTP is "not HTTP"; one that stops before its blank line was cut short.
func readProblem(ep Endpoint, err, writeErr error, seconds float64, head []byte) error {
	var netErr net.Error
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return unreachable{fmt.Sprintf("the daemon on %s did not answer within %ss",
			ep.Describe(), text.FormatSeconds(seconds))}
	case writeErr != nil && !errors.Is(writeErr, io.EOF):
		return unreachable{fmt.Sprintf("the daemon on %s dropped the connection (%s)",
			ep.Describe(), text.OSText(writeErr))}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return unreachable{fmt.Sprintf("the daemon on %s closed without an answer", ep.Describe())}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return unreachable{fmt.Sprintf("the daemon on %s dropped the connection (%s)",
			ep.Describe(), text.OSText(err))}
	}
	if len(head) > 0 && bytes.HasPrefix([]byte("HTTP/"), head[:minInt(len(head), 5)]) &&
		!bytes.Contains(head, []byte("\r\n\r\n")) {
		return unreachable{fmt.Sprintf("the daemon on %s closed without an answer", ep.Describe())}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return unreachable{fmt.Sprintf("the daemon on %s dropped the connection (%s)",
			ep.Describe(), text.OSText(err))}
	}
	return unreachable{fmt.Sprintf("%s does not speak HTTP", ep.Describe())}
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
