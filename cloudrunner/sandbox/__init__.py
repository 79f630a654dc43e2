"""Running one hook command in a hardened Docker container."""
