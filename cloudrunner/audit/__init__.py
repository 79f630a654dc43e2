"""The audit log: hash-chained, append-only JSON lines of everything the worker ran,
skipped, gated or refused (README.md, "The audit log" describes the format).

    writer = AuditWriter(path, worker="w1")
    writer.append(RecordKind.HOOK, {"event": "stop", "outcome": "ok", ...})
    verify_log(path).ok
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudrunner import lazy_export

if TYPE_CHECKING:
    from cloudrunner.audit.chain import GENESIS_HASH, canonical_json, record_hash
    from cloudrunner.audit.digest import PAYLOAD_TEXT_KEYS, TextDigest, digest_text, digest_value
    from cloudrunner.audit.failures import AuditLogError
    from cloudrunner.audit.lines import TornSpan
    from cloudrunner.audit.options import AuditConfig, FsyncPolicy
    from cloudrunner.audit.processors import record_processors
    from cloudrunner.audit.records import EventFields, HookFields, RecordKind
    from cloudrunner.audit.redaction import REDACTED, excerpt, redact
    from cloudrunner.audit.verify import Problem, TornLine, VerifyReport, log_files, verify_log
    from cloudrunner.audit.writer import AuditRecord, AuditWriter, TornAcknowledgement

# The names below are loaded on first use: `audit query` and `stats` read logs and should
# not import the writer's pipeline (structlog, asyncio) to do so.
_WHERE = {
    "AuditConfig": "cloudrunner.audit.options",
    "AuditLogError": "cloudrunner.audit.failures",
    "AuditRecord": "cloudrunner.audit.writer",
    "AuditWriter": "cloudrunner.audit.writer",
    "EventFields": "cloudrunner.audit.records",
    "FsyncPolicy": "cloudrunner.audit.options",
    "GENESIS_HASH": "cloudrunner.audit.chain",
    "HookFields": "cloudrunner.audit.records",
    "PAYLOAD_TEXT_KEYS": "cloudrunner.audit.digest",
    "Problem": "cloudrunner.audit.verify",
    "REDACTED": "cloudrunner.audit.redaction",
    "RecordKind": "cloudrunner.audit.records",
    "TextDigest": "cloudrunner.audit.digest",
    "TornAcknowledgement": "cloudrunner.audit.writer",
    "TornLine": "cloudrunner.audit.verify",
    "TornSpan": "cloudrunner.audit.lines",
    "VerifyReport": "cloudrunner.audit.verify",
    "canonical_json": "cloudrunner.audit.chain",
    "digest_text": "cloudrunner.audit.digest",
    "digest_value": "cloudrunner.audit.digest",
    "excerpt": "cloudrunner.audit.redaction",
    "log_files": "cloudrunner.audit.verify",
    "record_hash": "cloudrunner.audit.chain",
    "record_processors": "cloudrunner.audit.processors",
    "redact": "cloudrunner.audit.redaction",
    "verify_log": "cloudrunner.audit.verify",
}


def __getattr__(name: str) -> Any:
    return lazy_export(globals(), _WHERE, name)


__all__ = [
    "GENESIS_HASH",
    "PAYLOAD_TEXT_KEYS",
    "REDACTED",
    "AuditConfig",
    "AuditLogError",
    "AuditRecord",
    "AuditWriter",
    "EventFields",
    "FsyncPolicy",
    "HookFields",
    "Problem",
    "RecordKind",
    "TextDigest",
    "TornAcknowledgement",
    "TornLine",
    "TornSpan",
    "VerifyReport",
    "canonical_json",
    "digest_text",
    "digest_value",
    "excerpt",
    "log_files",
    "record_hash",
    "record_processors",
    "redact",
    "verify_log",
]
