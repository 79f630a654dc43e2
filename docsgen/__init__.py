"""The documentation site's reference pages, generated from the code they describe.

`python -m docsgen` writes them under docs/reference/; `python -m docsgen --check` fails
when a committed page differs from what the code gives now (the test suite runs it), so
the CLI, settings and protocol tables cannot drift from the code.
"""
