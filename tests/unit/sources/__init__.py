"""Tests of cloudrunner's sources package (unit tests)."""
