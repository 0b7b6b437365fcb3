"""The `bench` command line: a thin dispatcher over per-area command modules.

Each `rl_pipeline_bench.commands.<area>` module exposes `register(subparsers)`;
keeping areas apart lets runs, summaries, leases and provenance evolve separately.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from .config import ConfigError
from .paths import ROOT  # noqa: F401  (re-exported: the seed's Kubernetes one-liner imports it)
from .provenance import recipe_manifest, source_manifest  # noqa: F401  (same one-liner)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description="RL Systems Bench controller")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
