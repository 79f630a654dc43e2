"""The hooks protocol of spec/HOOKS.md: pure data and rules, no I/O of its own."""
