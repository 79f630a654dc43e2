"""Checks the project adds to mypy (not part of the installed package)."""
