"""Tests of the parity runner (bench/parity): made-up data sets, real git, no Docker."""
