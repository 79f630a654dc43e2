"""The command layer: one module per top-level `cloudrunner` command.

Each module holds its command's argparse definitions (`add_parser`, which adds the command
to the top-level parser) and thin handlers (`args -> exit code`); the work itself is done
by the modules that own it (the worker, the sandbox, the audit log, the images, the gate,
...). `cloudrunner.cli.main` owns parsing and the single error boundary.

Nothing is imported here: `cloudrunner hook` (commands/hook.py) starts on every agent step
and must import this package for free.
"""
