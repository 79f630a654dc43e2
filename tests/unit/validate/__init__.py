"""Tests of cloudrunner's validate package (unit tests)."""
