"""`python -m rl_pipeline_bench.leases run|list|clear`: the same as `bench lease`, without loading other commands.

Starting the supervisor this way skips importing every `bench` subcommand (some pull in
torch), which keeps lease start-up fast on busy machines.
"""

from __future__ import annotations

import argparse
import sys

from ..commands.lease import add_lease_arguments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl_pipeline_bench.leases", description="GPU lease supervisor")
    add_lease_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        from ..configfile import (
            ConfigError,  # lazy: config (jsonschema) is read only when no flag/env says it all
        )

        if not isinstance(exc, ConfigError):
            raise
        print(f"bench lease: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
