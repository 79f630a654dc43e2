// Command cloudrunner-hook is cloudrunner's compiled per-event client: the event JSON on
// stdin, the daemon's answer on stdout, with the same flags, variables, answers, stderr
// lines and exit codes as the Python `cloudrunner hook` (and `cloudrunner health`).
// Only Go's standard library, and not net/http: the binary starts once per agent event, and
// net/http's package initialisation alone cost each start ~0.4 ms, so httpwire.go writes the
// one HTTP/1.1 request and reads the answer itself (bufio, net/textproto) over the unix
// socket or TCP; encoding/json for the answers.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
	"unicode/utf8"
	"unsafe"
)

const exitUsage = 64

func main() {
	os.Exit(guarded(func() int { return run(os.Args[1:], os.Stdout, os.Stderr) }, os.Stderr))
}

func utf8Valid(b []byte) bool { return utf8.Valid(b) }

func say(stderr io.Writer, line string) { fmt.Fprintln(stderr, line) }

func usageFail(stderr io.Writer, message string) int {
	say(stderr, "cloudrunner: error: "+message)
	return exitUsage
}

func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseArgs(args)
	if err != nil {
		return usageFail(stderr, err.Error())
	}
	if opts.help {
		fmt.Fprint(stdout, hookHelp)
		return 0
	}
	if opts.version {
		fmt.Fprintln(stdout, describeVersion())
		return 0
	}
	if opts.command == "health" {
		return health(opts, stdout, stderr)
	}
	return hook(opts, stdout, stderr)
}

// policyInput is what the fail policy needs besides the problem.
type policyInput struct {
	event    string
	flag     string
	envSay   string
	ep       endpoint
	exitCode bool
	payload  []byte
}

func hook(opts *options, stdout, stderr io.Writer) int {
	event := opts.event
	if badEventName(event) {
		return usageFail(stderr, fmt.Sprintf("EVENT %s is not a hook event name (ASCII letters "+
			"and digits, like beforeShellExecution)", pyRepr(event)))
	}
	fallback := opts.fallback
	if fallback == "" {
		fallback = env("CLOUDRUNNER_FALLBACK")
	}
	if fallback == "" {
		fallback = "none"
	}
	if fallback != "none" && fallback != "in-process" {
		return usageFail(stderr, fmt.Sprintf("CLOUDRUNNER_FALLBACK=%s must be none or in-process",
			pyRepr(fallback)))
	}
	envSay, err := envFailClosed()
	if err != nil {
		return usageFail(stderr, err.Error())
	}
	ep, err := endpointFrom(opts.socket, opts.url, opts.tokenFile)
	if err != nil {
		return usageFail(stderr, err.Error())
	}
	var st syscall.Stat_t
	if syscall.Fstat(0, &st) != nil { // the agent closed descriptor 0 before starting us
		return usageFail(stderr, "cloudrunner hook reads the event JSON on stdin, and stdin is closed")
	}
	if isTerminal(0) {
		return usageFail(stderr, "cloudrunner hook reads the event JSON on stdin; pipe it in")
	}
	payload, err := io.ReadAll(os.Stdin)
	if err != nil {
		return usageFail(stderr, "cannot read the event JSON on stdin ("+osText(err)+")")
	}
	policy := policyInput{event: event, flag: opts.failFlag, envSay: envSay, ep: ep,
		exitCode: opts.exitCode, payload: payload}
	if opts.inProcess {
		return inProcess(opts, policy, stdout, stderr)
	}
	var problem string
	answer, err := request(ep, "POST", "/v1/events/"+event, payload, opts.timeout, connectTimeout)
	if err != nil {
		problem = err.Error()
	} else {
		if answer.status == 200 {
			return printAnswer(answer.body, opts.exitCode && answer.blocked, stdout, stderr)
		}
		code, message := errorOf(answer)
		if code != drainingCode {
			// The daemon is up and refused the event (and recorded it or said why it could
			// not): the policy answers, no fallback, nothing spooled.
			return byPolicy(policy, "the daemon refused the event: "+message, false, stdout, stderr)
		}
		problem = message
	}
	if fallback == "in-process" {
		say(stderr, "cloudrunner: "+problem+"; running the event in process")
		return inProcess(opts, policy, stdout, stderr)
	}
	return byPolicy(policy, problem, true, stdout, stderr)
}

// printAnswer prints the answer; a block under --exit-code also says its message on
// stderr and exits 2, like a single hook.
func printAnswer(body []byte, blocked bool, stdout, stderr io.Writer) int {
	if len(body) == 0 || body[len(body)-1] != '\n' {
		body = append(body, '\n')
	}
	if _, err := stdout.Write(body); err != nil {
		return 0 // nobody reads the answer any more (the Python client's BrokenPipeError)
	}
	if blocked {
		say(stderr, blockMessage(body))
		return 2
	}
	return 0
}

func blockMessage(body []byte) string {
	var answer map[string]any
	if json.Unmarshal(body, &answer) == nil {
		for _, key := range []string{"agent_message", "user_message"} {
			if text, ok := answer[key].(string); ok && text != "" {
				return text
			}
		}
	}
	return "blocked by cloudrunner"
}

// errorOf is the daemon's error code and message, or "http-STATUS" and the body's text.
func errorOf(answer *reply) (string, string) {
	var data struct {
		Error struct {
			Code    any `json:"code"`
			Message any `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(answer.body, &data) == nil {
		code, codeOK := data.Error.Code.(string)
		message, messageOK := data.Error.Message.(string)
		if codeOK && messageOK {
			return code, message
		}
	}
	text := firstRunes(trimPySpace(decodeReplace(answer.body)), 200)
	return fmt.Sprintf("http-%d", answer.status), fmt.Sprintf("HTTP %d: %s", answer.status, text)
}

// byPolicy answers without the daemon: blocked or neutral per the fail policy, said on
// stderr, and (spool: no daemon answered at all) appended to the fallback spool.
func byPolicy(p policyInput, problem string, spool bool, stdout, stderr io.Writer) int {
	dir := runDir(p.ep)
	d := decide(p.event, p.flag, p.envSay, dir)
	_, canBlock := blockingEvents[p.event]
	blocked := d.closed && canBlock
	var answer map[string]any
	var line string
	if blocked {
		answer = blockedAnswer(p.event, "cloudrunner could not run the hooks, so this is blocked "+
			"(fail-closed): "+problem)
		line = "cloudrunner: " + problem + "; blocking (fail-closed)"
		if d.decidedBy == "policy" {
			line += fmt.Sprintf(" (a failClosed hook is configured for %s, per %s)", p.event, d.policyPath)
		}
	} else {
		answer = neutralAnswer(p.event)
		line = "cloudrunner: " + problem + "; letting the event through (fail-open)"
	}
	say(stderr, line)
	for _, note := range d.notes {
		say(stderr, note)
	}
	if spool {
		if note := appendSpool(dir, spoolLine(p.event, answer, blocked, problem, d, p.payload)); note != "" {
			say(stderr, note)
		}
	}
	return printAnswer(compactJSON(answer), p.exitCode && blocked, stdout, stderr)
}

// isTerminal: is the descriptor a terminal (TCGETS answers)?
func isTerminal(fd int) bool {
	var termios syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS,
		uintptr(unsafe.Pointer(&termios)))
	return errno == 0
}
