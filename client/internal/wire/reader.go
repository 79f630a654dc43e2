package wire

// The client's one HTTP/1.1 exchange, written by hand: the request head, and the answer read
// with bufio and net/textproto. Importing net/http would do this for us, but its package
// initialisation (crypto/tls, x509, http2, mime...) runs on every start of the binary, and the
// binary starts once per agent event: a static program that only prints {} took 0.94 ms to
// spawn, 1.40 ms when it also imported net/http, 1.05 ms with net, bufio and encoding/json
// alone (300 interleaved spawns each).
//
// The reader takes what a cloudrunner daemon sends and nothing else: a status line, headers,
// a Content-Length (cloudrunner/daemon/asgi.py always sets one) and that many bytes. An answer
// framed any other way (chunked, running until the close, or a status that has no body) is
// not an answer, said in one line. What it does read, it reads as net/http's ReadResponse did (the Go tests compare the
// two on valid and fuzzed answers).

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/textproto"
	"strconv"
	"strings"
)

// limits bound what one answer may make the client read: the head (status line, headers,
// blank line), and the whole answer as it comes off the connection.
type limits struct {
	head  int64
	total int64
}

// daemonLimits: a cloudrunner daemon's head is a few hundred bytes and its answers (hook
// output, itself capped per hook) far below the total.
var daemonLimits = limits{head: 64 << 10, total: 64 << 20}

var (
	errHeadTooLarge = errors.New("the answer's head is too large")
	errTooLarge     = errors.New("the answer is too large")
	errNoLength     = errors.New("not framed by a Content-Length")
)

// answerBufferBytes is the read buffer (the size the client gave net/http).
const answerBufferBytes = 16 * 1024

// bodyError is a failure after the head was read (the caller says those differently).
type bodyError struct{ err error }

func (b bodyError) Error() string { return b.err.Error() }
func (b bodyError) Unwrap() error { return b.err }

// capped hands on at most `left` more bytes of the connection, then `over`; it keeps the
// first 64 KiB it read, to tell "not HTTP" from "cut short" afterwards.
type capped struct {
	src   io.Reader
	left  int64
	over  error
	read  int64
	first []byte
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, c.over
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.src.Read(p)
	c.left -= int64(n)
	c.read += int64(n)
	if room := 64*1024 - len(c.first); room > 0 {
		c.first = append(c.first, p[:minInt(n, room)]...)
	}
	return n, err
}

// requestHead is the head net/http's Request.Write sent for the client's requests: no
// User-Agent, `Connection: close`, a Content-Length except on a GET without a body, then
// Authorization and Content-Type (its sorted headers, CR and LF in a value made spaces).
func requestHead(method, path string, body []byte, token string) []byte {
	var b strings.Builder
	b.WriteString(method + " " + path + " HTTP/1.1\r\nHost: cloudrunner\r\nConnection: close\r\n")
	if len(body) > 0 || method != "GET" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	if token != "" {
		value := strings.NewReplacer("\r", " ", "\n", " ").Replace("Bearer " + token)
		b.WriteString("Authorization: " + textproto.TrimString(value) + "\r\n")
	}
	if len(body) > 0 {
		b.WriteString("Content-Type: application/json\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

// readReply reads one answer within the limits; a failure past the head is a bodyError. c
// wraps the connection; the caller reads what it kept (c.first) afterwards.
func readReply(c *capped, lim limits) (*Reply, error) {
	c.left, c.over = lim.head, errHeadTooLarge
	br := bufio.NewReaderSize(c, answerBufferBytes)
	status, blocked, length, err := readHead(br)
	if err != nil {
		return nil, err
	}
	// The body may bring the answer to its limit and no further (a length that lies past the
	// limit is found out when the reading reaches it).
	c.left, c.over = lim.total-c.read, errTooLarge
	var body bytes.Buffer
	copied, err := io.CopyN(&body, br, length) // grows only as the bytes come: a length that lies costs no memory
	if copied < length && (err == nil || err == io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, bodyError{err}
	}
	return &Reply{Status: status, Blocked: blocked, Body: body.Bytes()}, nil
}

// readHead reads the status line and the headers, and the body's length: the one
// Content-Length (errNoLength when there is none, or a Transfer-Encoding, or the status is one
// that has no body: 1xx, 204, 304).
func readHead(br *bufio.Reader) (status int, blocked bool, length int64, err error) {
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return 0, false, 0, eofUnexpected(err)
	}
	proto, rest, ok := strings.Cut(line, " ")
	if !ok {
		return 0, false, 0, errors.New("malformed status line")
	}
	code, _, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	status, err = strconv.Atoi(code)
	if len(code) != 3 || err != nil || status < 0 {
		return 0, false, 0, errors.New("malformed status code")
	}
	if !httpVersion(proto) {
		return 0, false, 0, errors.New("malformed HTTP version")
	}
	header, err := tp.ReadMIMEHeader()
	if err != nil {
		return 0, false, 0, eofUnexpected(err)
	}
	blocked = header.Get(blockedHeader) == "true"
	if _, chunked := header["Transfer-Encoding"]; chunked || status/100 == 1 || status == 204 || status == 304 {
		return status, blocked, 0, errNoLength // (those statuses carry no body, whatever their length says)
	}
	lengths := header["Content-Length"]
	for _, other := range lengths {
		if textproto.TrimString(other) != textproto.TrimString(lengths[0]) {
			return 0, false, 0, errors.New("differing Content-Length headers")
		}
	}
	if len(lengths) == 0 || textproto.TrimString(lengths[0]) == "" {
		return status, blocked, 0, errNoLength
	}
	n, err := strconv.ParseUint(textproto.TrimString(lengths[0]), 10, 63)
	if err != nil {
		return 0, false, 0, errors.New("bad Content-Length")
	}
	return status, blocked, int64(n), nil
}

// httpVersion: HTTP/X.Y with one digit each, as net/http takes it.
func httpVersion(proto string) bool {
	return len(proto) == len("HTTP/X.Y") && strings.HasPrefix(proto, "HTTP/") && proto[6] == '.' &&
		isDigit(proto[5]) && isDigit(proto[7])
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}
