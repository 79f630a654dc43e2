"""Tests of the daemon package (cloudrunner/daemon): its app, core, connections, models."""
