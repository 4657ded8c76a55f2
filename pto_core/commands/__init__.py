"""Subcommands of the `pto` CLI, one module each."""
