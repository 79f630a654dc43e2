"""Audit log failures the user sees as one line (the CLI's error boundary prints them)."""

from __future__ import annotations

from cloudrunner.errors import CloudrunnerError


class AuditLogError(CloudrunnerError):
    """An audit log cannot be read or written: names the file, what is wrong, what to do."""
