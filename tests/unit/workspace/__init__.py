"""Tests of cloudrunner's workspace package (unit tests)."""
