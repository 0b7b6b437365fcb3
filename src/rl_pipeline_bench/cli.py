"""The `bench` command line: a thin dispatcher over per-area command modules.

Each `rl_pipeline_bench.commands.<area>` module exposes `register(subparsers)`;
keeping areas apart lets runs, summaries, leases and provenance evolve separately.
A call imports only the module of its own command (`COMMAND_MODULES`): importing
every area (config validation, leases, NVML) cost about a second per `bench` process,
and the workflow starts one per job. Help and unknown commands load them all.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from .paths import ROOT  # noqa: F401  (re-exported: the seed's Kubernetes one-liner imports it)

#: The module under commands/ that registers each subcommand (tests/test_cli.py checks it
#: against the modules). A command missing here still works: its parser loads every module.
COMMAND_MODULES = {
    "attempts": "attempts",
    "build": "provenance",
    "eval": "eval",
    "gpus": "gpus",
    "lease": "lease",
    "mlflow": "mlflow",
    "paper": "report",
    "plan": "run",
    "preflight": "provenance",
    "probe": "probe",
    "provenance": "provenance",
    "report": "report",
    "run": "run",
    "schema": "schema",
    "snapshot": "provenance",
    "spec": "spec",
    "summarize": "summarize",
    "summarize-run": "summarize",
    "write-plan": "run",
}


def __getattr__(name: str):
    """`from rl_pipeline_bench.cli import recipe_manifest, source_manifest` (the seed's one-liner), loaded on use."""
    if name in ("recipe_manifest", "source_manifest"):
        from . import provenance

        return getattr(provenance, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def command_modules(argv: list[str] | None = None) -> list[str]:
    """The command modules a parser for `argv` needs: the command's own, or all of them."""
    every = sorted(info.name for info in pkgutil.iter_modules(commands.__path__))
    if argv and argv[0] in COMMAND_MODULES:
        return [COMMAND_MODULES[argv[0]]]
    return every


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with every command (no argv) or only what `argv`'s command needs."""
    parser = argparse.ArgumentParser(prog="bench", description="RL Systems Bench controller")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in command_modules(argv):
        importlib.import_module(f"{commands.__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except Exception as exc:
        from .configfile import ConfigError  # only on failure: config pulls in jsonschema and yaml
        from .redaction import redact_text

        if not isinstance(exc, ConfigError):
            raise
        print(f"bench: {redact_text(str(exc))}", file=sys.stderr)  # may quote a --set value
        return 2


if __name__ == "__main__":
    sys.exit(main())
