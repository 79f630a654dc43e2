"""The audit log: hash-chained, append-only JSON lines of everything the worker ran,
skipped, gated or refused (README.md, "The audit log" describes the format).

    writer = AuditWriter(path, worker="w1")
    writer.append(RecordKind.HOOK, {"event": "stop", "outcome": "ok", ...})
    verify_log(path).ok
"""

from cloudrunner.audit.chain import GENESIS_HASH, canonical_json, record_hash
from cloudrunner.audit.config import AuditConfig, FsyncPolicy
from cloudrunner.audit.digest import PAYLOAD_TEXT_KEYS, TextDigest, digest_text, digest_value
from cloudrunner.audit.errors import AuditLogError
from cloudrunner.audit.lines import TornSpan
from cloudrunner.audit.pipeline import record_processors
from cloudrunner.audit.records import EventFields, HookFields, RecordKind
from cloudrunner.audit.redaction import REDACTED, excerpt, redact
from cloudrunner.audit.verify import Problem, TornLine, VerifyReport, log_files, verify_log
from cloudrunner.audit.writer import AuditRecord, AuditWriter, TornAcknowledgement

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
