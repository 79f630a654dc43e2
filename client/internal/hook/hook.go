// Package hook is `cloudrunner-hook hook EVENT`: the event JSON on stdin to the daemon, its
// answer on stdout; with no answer, the fail policy's answer (spooled), or the event run
// through the Python client in process (--fallback in-process).
package hook

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"

	"cloudrunner.invalid/cloudrunner-hook/internal/cli"
	"cloudrunner.invalid/cloudrunner-hook/internal/events"
	"cloudrunner.invalid/cloudrunner-hook/internal/policy"
	"cloudrunner.invalid/cloudrunner-hook/internal/spool"
	"cloudrunner.invalid/cloudrunner-hook/internal/text"
	"cloudrunner.invalid/cloudrunner-hook/internal/wire"
)

// policyInput is what the fail policy needs besides the problem.
type policyInput struct {
	event    string
	flag     string
	envSay   string
	ep       wire.Endpoint
	exitCode bool
	payload  []byte
}

// Run is the hook command: 0 answered (or let through), 2 a block under --exit-code, 64 a
// usage error; stdin is the event's JSON.
func Run(opts *cli.Hook, stdin *os.File, stdout, stderr io.Writer) int {
	event := opts.Event
	if events.BadName(event) {
		return cli.Fail(stderr, fmt.Sprintf("EVENT %s is not a hook event name (ASCII letters "+
			"and digits, like beforeShellExecution)", text.PyRepr(event)))
	}
	fallback := opts.Fallback
	if fallback == "" {
		fallback = os.Getenv("CLOUDRUNNER_FALLBACK")
	}
	if fallback == "" {
		fallback = "none"
	}
	if fallback != "none" && fallback != "in-process" {
		return cli.Fail(stderr, fmt.Sprintf("CLOUDRUNNER_FALLBACK=%s must be none or in-process",
			text.PyRepr(fallback)))
	}
	envSay, err := policy.EnvFailClosed()
	if err != nil {
		return cli.Fail(stderr, err.Error())
	}
	ep, err := wire.EndpointFrom(opts.Socket, opts.URL, opts.TokenFile)
	if err != nil {
		return cli.Fail(stderr, err.Error())
	}
	info, err := stdin.Stat()
	if err != nil { // the agent closed descriptor 0 before starting us
		return cli.Fail(stderr, "cloudrunner hook reads the event JSON on stdin, and stdin is closed")
	}
	if isTerminal(info) {
		return cli.Fail(stderr, "cloudrunner hook reads the event JSON on stdin; pipe it in")
	}
	payload, err := io.ReadAll(stdin)
	if err != nil {
		return cli.Fail(stderr, "cannot read the event JSON on stdin ("+text.OSText(err)+")")
	}
	p := policyInput{event: event, flag: opts.FailFlag, envSay: envSay, ep: ep,
		exitCode: opts.ExitCode, payload: payload}
	if opts.InProcess {
		return inProcess(opts, p, stdout, stderr)
	}
	var problem string
	answer, err := wire.Request(ep, "POST", "/v1/events/"+event, payload, opts.Timeout, wire.ConnectTimeout)
	if err != nil {
		problem = err.Error()
	} else {
		if answer.Status == 200 {
			return printAnswer(answer.Body, opts.ExitCode && answer.Blocked, stdout, stderr)
		}
		code, message := errorOf(answer)
		if code != events.DrainingCode {
			// The daemon is up and refused the event (and recorded it or said why it could
			// not): the policy answers, no fallback, nothing spooled.
			return byPolicy(p, "the daemon refused the event: "+message, false, stdout, stderr)
		}
		problem = message
	}
	if fallback == "in-process" {
		text.Say(stderr, "cloudrunner: "+problem+"; running the event in process")
		return inProcess(opts, p, stdout, stderr)
	}
	return byPolicy(p, problem, true, stdout, stderr)
}

// memoryDevices is Linux's character device major of /dev/null, /dev/zero, /dev/full and
// the random devices: character devices that are no terminal.
const memoryDevices = 1

// isTerminal: whether stdin is a terminal, without an ioctl (which needs unsafe): a
// character device that is not one of the memory devices (/dev/null opened write-only is a
// stdin that cannot be read, said as such by the read, as the Python client says it).
func isTerminal(info os.FileInfo) bool {
	if info.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return !ok || major(uint64(st.Rdev)) != memoryDevices
}

// major is the major number of a Linux device number (glibc's gnu_dev_major).
func major(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^0xfff }

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
		text.Say(stderr, blockMessage(body))
		return 2
	}
	return 0
}

func blockMessage(body []byte) string {
	var answer map[string]any
	if json.Unmarshal(body, &answer) == nil {
		for _, key := range []string{"agent_message", "user_message"} {
			if message, ok := answer[key].(string); ok && message != "" {
				return message
			}
		}
	}
	return "blocked by cloudrunner"
}

// errorOf is the daemon's error code and message, or "http-STATUS" and the body's text.
func errorOf(answer *wire.Reply) (string, string) {
	var data struct {
		Error struct {
			Code    any `json:"code"`
			Message any `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(answer.Body, &data) == nil {
		code, codeOK := data.Error.Code.(string)
		message, messageOK := data.Error.Message.(string)
		if codeOK && messageOK {
			return code, message
		}
	}
	body := text.FirstRunes(text.TrimPySpace(text.DecodeReplace(answer.Body)), 200)
	return fmt.Sprintf("http-%d", answer.Status), fmt.Sprintf("HTTP %d: %s", answer.Status, body)
}

// byPolicy answers without the daemon: blocked or neutral per the fail policy, said on
// stderr, and (spooled: no daemon answered at all) appended to the fallback spool.
func byPolicy(p policyInput, problem string, spooled bool, stdout, stderr io.Writer) int {
	dir := policy.RunDir(p.ep)
	d := policy.Decide(p.event, p.flag, p.envSay, dir)
	blocked := d.Closed && events.CanBlock(p.event)
	var answer map[string]any
	var line string
	if blocked {
		answer = events.BlockedAnswer(p.event, "cloudrunner could not run the hooks, so this is blocked "+
			"(fail-closed): "+problem)
		line = "cloudrunner: " + problem + "; blocking (fail-closed)"
		if d.DecidedBy == "policy" {
			line += fmt.Sprintf(" (a failClosed hook is configured for %s, per %s)", p.event, d.PolicyPath)
		}
	} else {
		answer = events.NeutralAnswer(p.event)
		line = "cloudrunner: " + problem + "; letting the event through (fail-open)"
	}
	text.Say(stderr, line)
	for _, note := range d.Notes {
		text.Say(stderr, note)
	}
	if spooled {
		if note := spool.Append(dir, spool.Line(p.event, answer, blocked, problem, d, p.payload)); note != "" {
			text.Say(stderr, note)
		}
	}
	return printAnswer(text.CompactJSON(answer), p.exitCode && blocked, stdout, stderr)
}
