// Package crash turns a panic into exit 70 and one stderr line naming the saved trace.
package crash

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"cloudrunner.invalid/cloudrunner-hook/internal/text"
)

// ExitInternal is the Python client's ExitCode.INTERNAL: a bug, not an answer. Go's own
// exit status for an unrecovered panic is 2, which an agent reads as a hook's block, so
// every panic is caught here instead.
const ExitInternal = 70

// bugFilePrefix names the file a bug's trace is saved in, in the temporary directory
// (readable by the user only), as the Python client names its traceback file.
const bugFilePrefix = "cloudrunner-bug-"

// Guarded runs body and turns a panic into exit 70: the trace goes to a file of its own,
// stderr gets one line naming it (or, when the file cannot be written, the trace itself).
func Guarded(body func() int, stderr io.Writer) (code int) {
	defer func() {
		caught := recover()
		if caught == nil {
			return
		}
		trace := fmt.Sprintf("panic: %v\n\n%s", caught, debug.Stack())
		code = reportBug(fmt.Sprintf("%T", caught), trace, os.TempDir(), stderr)
	}()
	return body()
}

func reportBug(kind, trace, dir string, stderr io.Writer) int {
	file, err := os.CreateTemp(dir, bugFilePrefix+"*.log") // mode 0600
	if err == nil {
		_, err = file.WriteString(trace)
		if closeErr := file.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			os.Remove(file.Name())
		}
	}
	if err != nil {
		fmt.Fprint(stderr, trace)
		text.Say(stderr, fmt.Sprintf("cloudrunner: internal error (%s), a bug: trace above "+
			"(could not save it: %s); please report it", kind, text.OSText(err)))
		return ExitInternal
	}
	text.Say(stderr, fmt.Sprintf("cloudrunner: internal error (%s), a bug: trace written to %s; "+
		"please report it", kind, file.Name()))
	return ExitInternal
}
