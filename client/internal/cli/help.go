package cli

// Help is what `cloudrunner-hook --help` (or a command's --help) prints.
const Help = `usage: cloudrunner-hook hook EVENT [--socket PATH | --url http://HOST:PORT]
                             [--token-file FILE] [--exit-code]
                             [--fallback {none,in-process}] [--fail-closed | --fail-open]
                             [--in-process] [--config FILE] [--timeout SECONDS]
       cloudrunner-hook health [--socket PATH | --url http://HOST:PORT]
                               [--token-file FILE] [--ready] [--timeout SECONDS]
       cloudrunner-hook --version

The compiled per-event client of cloudrunner: the event JSON on stdin, the daemon's
answer on stdout. The same flags, variables, answers and exit codes as
'cloudrunner hook' and 'cloudrunner health'.

  EVENT                 the hook event name (beforeShellExecution, ...)
  --socket PATH         the daemon's unix socket (CLOUDRUNNER_SOCKET; default
                        $CLOUDRUNNER_STATE_DIR/cloudrunner.sock, state dir /var/lib/cloudrunner)
  --url http://HOST:PORT
                        the daemon's TCP address (CLOUDRUNNER_URL)
  --token-file FILE     bearer token for --url (CLOUDRUNNER_TOKEN_FILE)
  --exit-code           exit 2 on a block, like a single hook (the answer is still printed)
  --fallback {none,in-process}
                        with no daemon: run the event through the Python 'cloudrunner'
                        (in-process), or answer by the fail policy (none, the default;
                        CLOUDRUNNER_FALLBACK)
  --fail-closed         when no daemon answers, block the event (CLOUDRUNNER_FAIL_CLOSED=1)
  --fail-open           when no daemon answers, let it through (CLOUDRUNNER_FAIL_CLOSED=0)
  --in-process          run the event through the Python 'cloudrunner' without a daemon
  --config FILE         settings file for --fallback in-process
  --timeout SECONDS     how long to wait for the answer (default 600; health: 5)
  --ready               health: check /readyz (engine and images) instead of /healthz
  --version             print the version and the commit it was built from, as
                        'cloudrunner --version' does

Exit codes: 0 answered (or let through), 2 a block under --exit-code, 64 a usage error,
70 a bug (its trace saved in a file the one stderr line names); health: 0 healthy, 1 not.
`
