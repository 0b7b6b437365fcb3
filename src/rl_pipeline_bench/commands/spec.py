"""`bench spec write|check|show`: the resolved run spec file (docs/run-spec.md).

`write` is what the workflow's run_spec rule executes: Snakemake resolved the config
(config.yaml + --configfile + --config) and passes the spec document; the command
re-checks its hash and writes it atomically. `check` verifies a file; `show` prints
the spec a config would resolve to.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import paths


def _write(args: argparse.Namespace) -> int:
    from ..settings.spec import write_spec

    try:
        doc = json.loads(args.doc)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"bench spec write: --doc is not JSON: {exc}") from None
    spec = write_spec(doc, args.output)
    print(f"wrote {args.output}: spec {spec.id}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from ..settings.spec import load_spec

    spec = load_spec(args.path)
    print(f"{args.path}: spec {spec.id} ok (schema, hash and file name agree)")
    return 0


def _show(args: argparse.Namespace) -> int:
    from .run import spec_of

    spec = spec_of(args)
    print(json.dumps(spec.doc, indent=2))
    return 0


def register(subparsers) -> None:
    from .run import add_spec_args

    p = subparsers.add_parser("spec", help="the resolved run spec file: write (workflow), check, show")
    sub = p.add_subparsers(dest="spec_command", required=True, metavar="ACTION")
    w = sub.add_parser("write", help="check a spec document's hash and write it atomically (the run_spec rule)")
    w.add_argument("--doc", required=True, help="the spec document as JSON")
    w.add_argument("--output", type=Path, required=True, help=str(paths.spec_file("SUITE-HASH")))
    w.set_defaults(func=_write)
    c = sub.add_parser("check", help="verify a spec file: schema, settings hash, file name")
    c.add_argument("path", type=Path)
    c.set_defaults(func=_check)
    s = sub.add_parser("show", help="print the spec a config resolves to (without --spec)")
    add_spec_args(s)
    s.set_defaults(func=_show)
