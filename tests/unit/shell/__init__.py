"""Tests of cloudrunner's shell package (unit tests)."""
