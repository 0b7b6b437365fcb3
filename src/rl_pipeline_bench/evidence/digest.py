"""Digests that bind a summary to the evidence it was computed from, and to its own content.

A summary is derived data: if the evidence changes after summarisation, or the summary
is edited, the report must not show the old numbers as valid. So:

- `run.json` records `evidence_digest` when the run ends (the evidence as the run left it);
- every summary records the `evidence_digest` it was computed from and `summary_sha256`,
  the digest of its own content;
- the report recomputes both (`summary_problems`) and shows a mismatch as an invalid run
  with a named reason (`summary_stale`, `summary_edited`, `summary_malformed`);
- the workflow's summarize rule takes the edited files as inputs (`edited_evidence`), so an
  evidence edit changes its input set and Snakemake re-summarises it.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any
from ..records.jsonfile import JsonFileError, read_json

#: The evidence files a summary is computed from (evidence.MANIFEST, UPDATES, CALLS, INTERVALS).
DIGESTED = ("manifest.json", "updates.parquet", "calls.parquet", "trainer_intervals.parquet")
#: The summary's key holding the digest of the rest of it.
SELF_KEY = "summary_sha256"
#: The reasons `summary_problems` gives (docs/validation.md lists each; a test checks it).
SUMMARY_CHECK_CODES = ("summary_malformed", "summary_unsealed", "summary_edited", "summary_stale")


def file_sha256(path: Path) -> str | None:
    """sha256 of a regular file's bytes; None when it is missing or not a regular file (a FIFO is never opened)."""
    try:
        if not path.is_file():
            return None
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def evidence_digest(evidence_dir: Path | str) -> dict[str, str | None]:
    """{file name: sha256 or None when absent} of the files a summary reads."""
    return {name: file_sha256(Path(evidence_dir) / name) for name in DIGESTED}


def summary_sha256(summary: dict[str, Any]) -> str:
    """sha256 of the summary's canonical JSON, without its own digest key."""
    body = {k: v for k, v in summary.items() if k != SELF_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def seal(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with its own digest added (the last thing done before it is written)."""
    summary[SELF_KEY] = summary_sha256(summary)
    return summary


def changed_files(recorded: Any, evidence_dir: Path | str) -> list[str]:
    """The digested files whose bytes differ from `recorded` (all of them when nothing usable is recorded)."""
    now = evidence_digest(evidence_dir)
    if not isinstance(recorded, dict):
        return list(DIGESTED)
    return [name for name in DIGESTED if recorded.get(name) != now[name]]


def edited_evidence(run_json: Path | str) -> list[str]:
    """The summarize rule's extra input: nothing while the evidence is as the run left it (or there
    is no run yet), else the edited files (the directory for a deleted one). The input set then
    changes, which re-runs the summary; it stays the same until the evidence changes again."""
    try:
        record = read_json(run_json, "run record")
        evidence_dir = Path(record["evidence_dir"])
        recorded = record["evidence_digest"]
    except (JsonFileError, KeyError, TypeError):
        return []  # no run yet, or a record of a version without digests: nothing to compare
    changed = changed_files(recorded, evidence_dir)
    paths = [str(evidence_dir / name) for name in changed if (evidence_dir / name).is_file()]
    if len(paths) < len(changed) and evidence_dir.is_dir():
        paths.append(str(evidence_dir))
    return paths


def _rate_problems(section: Any, where: str) -> list[str]:
    if not isinstance(section, dict):
        return [f"{where} is not an object"]
    out = []
    for key, value in section.items():
        if key.endswith("_per_s") and value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0):
            out.append(f"{where}.{key} is {value!r}, not a non-negative number")
    return out


def shape_problems(summary: dict[str, Any]) -> list[str]:
    """What a summary written by this code cannot look like (types, verdict against reasons, rates)."""
    problems = []
    if not isinstance(summary.get("valid"), bool):
        problems.append(f"valid is {summary.get('valid')!r}, not true or false")
    reasons = summary.get("reasons")
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        problems.append("reasons is not a list of strings")
    elif isinstance(summary.get("valid"), bool) and summary["valid"] != (not reasons):
        problems.append(f"valid is {summary['valid']} with {len(reasons)} reason(s)")
    e2e = summary.get("e2e")
    if not isinstance(e2e, dict):
        problems.append(f"e2e is {e2e!r}, not an object")
    else:
        for window in ("headline", "measured"):
            problems += _rate_problems(e2e.get(window), f"e2e.{window}")
    trainer = summary.get("trainer")
    problems += _rate_problems(trainer.get("headline") if isinstance(trainer, dict) else trainer, "trainer.headline")
    return problems


def summary_problems(summary: dict[str, Any], evidence_dir: Path | None) -> list[str]:
    """Named reasons the report must not believe this summary; empty when it is intact and current."""
    shape = shape_problems(summary)
    if shape:
        return [f"summary_malformed: {'; '.join(shape)}"]
    if summary.get(SELF_KEY) is None:
        return ["summary_unsealed: the summary records no summary_sha256 (written by an older version, or "
                "edited); re-summarise it (`snakemake --forcerun summarize_run ...`)"]
    if summary[SELF_KEY] != summary_sha256(summary):
        return ["summary_edited: the summary's content does not match its summary_sha256 (it was edited after "
                "summarisation); re-summarise it from its evidence"]
    if evidence_dir is None:
        return []  # the report already names a missing evidence directory
    changed = changed_files(summary.get("evidence_digest"), evidence_dir)
    if changed:
        return [f"summary_stale: evidence file(s) {', '.join(changed)} changed since the summary was written; "
                "re-summarise it (the workflow does so on its next run)"]
    return []
