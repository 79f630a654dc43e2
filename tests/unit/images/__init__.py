"""Tests of cloudrunner's images package (unit tests)."""
