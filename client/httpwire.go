package main

// The client's one HTTP/1.1 exchange, written by hand: the request head, and the answer read
// with bufio and net/textproto. Importing net/http would do this for us, but its package
// initialisation (crypto/tls, x509, http2, mime...) runs on every start of the binary, and the
// binary starts once per agent event: a static program that only prints {} took 0.94 ms to
// spawn, 1.40 ms when it also imported net/http, 1.05 ms with net, bufio and encoding/json
// alone (300 interleaved spawns each). The reading follows net/http's ReadResponse rule for
// rule (status line, headers, Transfer-Encoding, Content-Length, chunks and trailers), so the
// answers and the problems said are the ones the client gave when it used net/http; the Go
// tests compare the two on valid and fuzzed answers.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/textproto"
	"strconv"
	"strings"
)

// answerLimits bound what one answer may make the client read: the head (status line,
// headers, blank line), and the whole answer as it comes off the connection.
type answerLimits struct {
	head  int64
	total int64
}

// daemonLimits: a cloudrunner daemon's head is a few hundred bytes and its answers (hook
// output, itself capped per hook) far below the total.
var daemonLimits = answerLimits{head: 64 << 10, total: 64 << 20}

var (
	errHeadTooLarge = errors.New("the answer's head is too large")
	errTooLarge     = errors.New("the answer is too large")
)

// answerBufferBytes is the read buffer (the size the client gave net/http); a chunk-size line
// longer than it, or a trailer that does not end within it, is refused, as net/http did.
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
		c.first = append(c.first, p[:min(n, room)]...)
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

// readReply reads one answer from src within the limits; a failure past the head is a
// bodyError. c wraps the connection; the caller reads what it kept (c.first) afterwards.
func readReply(c *capped, lim answerLimits) (*reply, error) {
	c.left, c.over = lim.head, errHeadTooLarge
	br := bufio.NewReaderSize(c, answerBufferBytes)
	status, chunked, length, err := readHead(br)
	if err != nil {
		return nil, err
	}
	// The rest of the answer may bring the total to one byte past the limit: that byte tells
	// an answer of exactly the limit (then the close) from a longer one.
	c.left, c.over = lim.total+1-c.read, errTooLarge
	var body []byte
	switch {
	case chunked:
		body, err = readChunks(br)
	case length >= 0:
		var buf bytes.Buffer
		err = readExactly(br, length, &buf)
		body = buf.Bytes()
	default: // neither: the body runs until the daemon closes
		body, err = io.ReadAll(br)
	}
	if err != nil {
		return nil, bodyError{err}
	}
	return &reply{status: status.code, blocked: status.blocked, body: body}, nil
}

type statusOf struct {
	code    int
	blocked bool
}

// readHead reads the status line and headers and decides how the body is framed: chunked, a
// length, or (length -1) until the close.
func readHead(br *bufio.Reader) (status statusOf, chunked bool, length int64, err error) {
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return status, false, 0, eofUnexpected(err)
	}
	proto, rest, ok := strings.Cut(line, " ")
	if !ok {
		return status, false, 0, errors.New("malformed status line")
	}
	code, _, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	status.code, err = strconv.Atoi(code)
	if len(code) != 3 || err != nil || status.code < 0 {
		return status, false, 0, errors.New("malformed status code")
	}
	major, minor, ok := httpVersion(proto)
	if !ok {
		return status, false, 0, errors.New("malformed HTTP version")
	}
	header, err := tp.ReadMIMEHeader()
	if err != nil {
		return status, false, 0, eofUnexpected(err)
	}
	status.blocked = header.Get(blockedHeader) == "true"

	// Transfer-Encoding counts from HTTP/1.1 on (HTTP/0.0 is taken for 1.1, as net/http
	// does), and only as one "chunked" (it then overrides Content-Length).
	if major == 0 && minor == 0 {
		major, minor = 1, 1
	}
	if encodings, present := header["Transfer-Encoding"]; present && (major > 1 || major == 1 && minor >= 1) {
		if len(encodings) != 1 || !asciiEqualFold(encodings[0], "chunked") {
			return status, false, 0, errors.New("unsupported transfer encoding")
		}
		chunked = true
		delete(header, "Content-Length")
	}
	lengths := header["Content-Length"]
	for _, other := range lengths {
		if textproto.TrimString(other) != textproto.TrimString(lengths[0]) {
			return status, false, 0, errors.New("differing Content-Length headers")
		}
	}
	if chunked {
		for _, names := range header["Trailer"] {
			for _, name := range strings.Split(names, ",") {
				switch textproto.CanonicalMIMEHeaderKey(textproto.TrimString(name)) {
				case "Transfer-Encoding", "Trailer", "Content-Length":
					return status, false, 0, errors.New("bad trailer name")
				}
			}
		}
	}
	length = -1
	switch {
	case status.code/100 == 1 || status.code == 204 || status.code == 304:
		return status, false, 0, nil // no body, whatever the headers say
	case chunked:
		return status, true, -1, nil
	case len(lengths) > 0 && textproto.TrimString(lengths[0]) != "":
		n, err := strconv.ParseUint(textproto.TrimString(lengths[0]), 10, 63)
		if err != nil {
			return status, false, 0, errors.New("bad Content-Length")
		}
		length = int64(n)
	}
	return status, false, length, nil
}

// httpVersion: HTTP/1.1, HTTP/1.0, or HTTP/X.Y with one digit each.
func httpVersion(proto string) (major, minor int, ok bool) {
	if len(proto) != len("HTTP/X.Y") || !strings.HasPrefix(proto, "HTTP/") || proto[6] != '.' ||
		!isDigit(proto[5]) || !isDigit(proto[7]) {
		return 0, 0, false
	}
	return int(proto[5] - '0'), int(proto[7] - '0'), true
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

var (
	errChunkLine    = errors.New("chunk size line too long")
	errChunkSize    = errors.New("bad chunk size")
	errChunkEnd     = errors.New("a chunk does not end with CRLF")
	errTrailerEOF   = errors.New("unexpected end in the trailer")
	errTrailerLarge = errors.New("trailer too long")
)

// readChunks decodes a chunked body: hex size lines (extensions after ";" ignored), each
// chunk followed by CRLF, a zero size, then CRLF or trailers up to a blank line.
func readChunks(br *bufio.Reader) ([]byte, error) {
	var body bytes.Buffer
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, errChunkLine
		}
		if err != nil {
			return nil, eofUnexpected(err)
		}
		if len(line) >= 4096 {
			return nil, errChunkLine
		}
		line = bytes.TrimRight(line, " \t\r\n")
		line, _, _ = bytes.Cut(line, []byte(";"))
		if len(line) > 16 {
			return nil, errChunkSize
		}
		size, err := strconv.ParseUint("0"+string(line), 16, 64)
		if err != nil {
			return nil, errChunkSize
		}
		if size > 1<<62 { // more than the limit lets through anyway
			size = 1 << 62
		}
		if size == 0 {
			return body.Bytes(), readTrailer(br)
		}
		if err := readExactly(br, int64(size), &body); err != nil {
			return nil, err
		}
		var end [2]byte
		if _, err := io.ReadFull(br, end[:]); err != nil {
			return nil, eofUnexpected(err)
		}
		if end != [2]byte{'\r', '\n'} {
			return nil, errChunkEnd
		}
	}
}

// readExactly appends n bytes of br to buf, growing it only as the bytes come (a length
// that lies costs no memory); fewer then the end is an answer cut short.
func readExactly(br *bufio.Reader, n int64, buf *bytes.Buffer) error {
	copied, err := io.CopyN(buf, br, n)
	if copied < n && (err == nil || err == io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readTrailer: CRLF, or header lines up to a blank line that must show within the buffer.
func readTrailer(br *bufio.Reader) error {
	buf, err := br.Peek(2)
	if string(buf) == "\r\n" {
		_, _ = br.Discard(2)
		return nil
	}
	if errors.Is(err, errTooLarge) {
		return err
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	for size := 4; ; size++ {
		buf, err := br.Peek(size)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			break
		}
		if errors.Is(err, errTooLarge) {
			return err
		}
		if err != nil {
			return errTrailerLarge
		}
	}
	if _, err := textproto.NewReader(br).ReadMIMEHeader(); err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return err
	}
	return nil
}
