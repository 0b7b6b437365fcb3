"""Subcommands of `bench`, one module per area; each defines register(subparsers)."""
