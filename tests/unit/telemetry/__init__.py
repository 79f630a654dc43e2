"""Tests of cloudrunner/telemetry: traceparent, endpoint, spans, provider."""
