"""`bench attempts seed|list`: the attempts index (paths.ATTEMPTS_INDEX, rl_pipeline_bench.evidence.attempts)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import paths


def _seed(args: argparse.Namespace) -> int:
    from ..evidence.attempts import seed_index

    if not args.evidence_root.is_dir():  # nothing to seed from is a mistake, not "0 added"
        raise FileNotFoundError(2, "no such evidence directory", str(args.evidence_root))
    n = seed_index(args.evidence_root, args.output)
    print(f"{args.output}: {n} evidence director{'y' if n == 1 else 'ies'} the index lacked added (nothing re-scored)")
    return 0


def _list(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..evidence.attempts import read_attempts
    from ..paths import require_regular_file

    require_regular_file(args.index, "attempts index")  # a FIFO would block the reader forever
    found, problems = read_attempts(args.index)
    if args.json:
        print(json.dumps([asdict(a) for a in found], indent=2))
    else:
        for a in found:
            verdict = "not judged" if a.valid is None else ("valid" if a.valid else "INVALID")
            print(f"{a.name}  {a.status_text or '?'}  {verdict}  {a.spec or a.suite or '?'}"
                  f"  {a.backend or '?'}/{a.workload or '?'}/trial{a.trial if a.trial is not None else '?'}")
    for p in problems:
        print(f"bench attempts: {p}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("attempts", help="the attempts index: seed it from existing evidence, list it")
    sub = p.add_subparsers(dest="attempts_command", required=True, metavar="ACTION")
    s = sub.add_parser("seed", help="add evidence directories the index lacks (evidence older than the index)")
    s.add_argument("--evidence-root", type=Path, default=Path(paths.EVIDENCE_ROOT))
    s.add_argument("--output", type=Path, default=Path(paths.ATTEMPTS_INDEX))
    s.set_defaults(func=_seed)
    ls = sub.add_parser("list", help="every attempt: status, verdict, spec, backend/workload/trial")
    ls.add_argument("--index", type=Path, default=Path(paths.ATTEMPTS_INDEX))
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)
