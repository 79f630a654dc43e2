"""Tests of the generated reference pages and the strict docs build (docsgen)."""
