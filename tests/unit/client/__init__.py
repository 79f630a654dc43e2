"""Tests of cloudrunner's client package (unit tests)."""
