"""Tests of cloudrunner's vm package (unit tests)."""
