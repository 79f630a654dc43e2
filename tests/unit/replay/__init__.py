"""Tests of cloudrunner's replay package (unit tests)."""
