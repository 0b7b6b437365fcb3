"""Snakemake script for rule summarize_run: run.json -> summary.json via the contract code.

Reads the evidence directory that run.json points at and writes the same summary that
`bench summarize` prints; it never re-runs a benchmark.
"""

import json
import logging
from pathlib import Path

from rl_pipeline_bench.contract import summarize_to_file


def main(run_json: Path, out_path: Path, log_path: Path) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = logging.getLogger("rl_pipeline_bench.summarize_run")
    log.setLevel(logging.INFO)
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    try:
        _summarize(run_json, out_path, log)
    except Exception:
        log.exception("summary of %s failed", run_json)
        raise
    finally:
        log.removeHandler(handler)
        handler.close()


def _summarize(run_json: Path, out_path: Path, log: logging.Logger) -> None:
    try:
        record = json.loads(run_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{run_json}: not a readable run record ({exc})") from None
    evidence_dir = record.get("evidence_dir") if isinstance(record, dict) else None
    if not evidence_dir:
        raise ValueError(f"{run_json}: no 'evidence_dir' key; cannot locate the run's evidence")
    log.info("summarizing %s -> %s", evidence_dir, out_path)
    summary = summarize_to_file(Path(evidence_dir), out_path)
    log.info("valid=%s reasons=%s", summary["valid"], summary["reasons"])


main(Path(snakemake.input.run), Path(snakemake.output[0]), Path(snakemake.log[0]))  # noqa: F821
