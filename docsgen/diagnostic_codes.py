"""Every diagnostic code and its meaning, one table row each, from
`cloudrunner.protocol.diagnostic_codes`: put into docs/reference/protocol.md where it says
`<!-- docsgen: diagnostic-codes -->`, so a code added in code shows on the page."""

from __future__ import annotations

from cloudrunner.protocol.diagnostic_codes import MEANINGS, DiagnosticCode
from docsgen.markdown import code, table


def render() -> str:
    return table(("code", "meaning"), ((code(c.value), MEANINGS[c]) for c in DiagnosticCode))
