"""Tests of cloudrunner's images package (integration tests)."""
