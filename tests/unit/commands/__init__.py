"""Unit tests of the command layer, cloudrunner/commands/: one file per command module."""
