"""Tests of egress policy: rules, the Squid configuration, credentials, the access log."""
