package main

import "fmt"

// version and commit are stamped at build time by client/build
// (-ldflags "-X main.version=... -X main.commit=..."), from cloudrunner/version.py, the one
// source of cloudrunner's version, and the commit the build was made from. A plain
// `go build` leaves them "unknown".
var (
	version = "unknown"
	commit  = "unknown"
)

// describeVersion is what `cloudrunner-hook --version` prints, the same words as
// `cloudrunner --version` but for the program's name.
func describeVersion() string {
	return fmt.Sprintf("cloudrunner-hook %s (commit %s)", version, commit)
}
