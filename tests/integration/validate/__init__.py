"""Tests of cloudrunner's validate package (integration tests)."""
