"""Entry points of the workflow's light rules (summaries, report), run as `bench` commands.

Measured on a 2-core machine: a `script:` job re-imports Snakemake (seconds), and a
`run:` block imports pandas/matplotlib inside Snakemake's own busy process several
times slower than a fresh interpreter does. So the rules call `bench summarize-run`
and `bench report`, and these functions do the work with their log records going
to the job's log file (or stderr).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .records.jsonfile import RunRecordError

log = logging.getLogger("rl_pipeline_bench.jobs")



@contextlib.contextmanager
def job_log(path: str | Path | None = None) -> Iterator[logging.Logger]:
    """Send the package's log records to `path` (or stderr); record a failure's traceback in the file.

    On stderr the failure is left to the `bench` error handler, which prints it once as one line.
    """
    if path is None:
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
    else:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("rl_pipeline_bench")
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield log
    except Exception:
        if path is not None:
            log.exception("job failed")
        raise
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
        handler.close()


@dataclass(frozen=True)
class RunInputs:
    """One run's record, read and checked once per job: its evidence directory and its spec."""

    run_json: Path
    record: dict[str, Any]
    evidence_dir: Path
    spec: Any  # rl_pipeline_bench.settings.spec.RunSpec, or None for a run summarized on its own


def read_run(run_json: str | Path, spec_path: str | Path | None = None) -> RunInputs:
    """run.json -> its evidence directory (RunRecordError naming the file otherwise); with a spec,
    the record and the evidence manifest must both name its hash (SpecError naming both)."""
    from .records.jsonfile import read_json

    run_json = Path(run_json)
    record = read_json(run_json, "run record", error=RunRecordError)
    evidence_dir = record.get("evidence_dir") if isinstance(record, dict) else None
    if not evidence_dir or not isinstance(evidence_dir, str):
        raise RunRecordError(f"run record {run_json} has no usable 'evidence_dir' (a path); cannot locate the run's evidence")
    spec = None
    if spec_path is not None:
        from .settings.spec import check_run_spec, load_spec

        spec = load_spec(spec_path)
        check_run_spec(record, run_json, Path(evidence_dir), spec)
    return RunInputs(run_json, record, Path(evidence_dir), spec)


def summarize_run(run_json: str | Path, out_path: str | Path, log_path: str | Path | None = None,
                  spec_path: str | Path | None = None, attempts_index: str | Path | None = None,
                  plan_path: str | Path | None = None, infra_path: str | Path | None = None,
                  card_path: str | Path | None = None) -> dict[str, Any]:
    """run.json -> summary.json with the contract code (and infra.json when asked); never re-runs a benchmark.

    With a spec, the run record and the evidence manifest must both name its hash; with a
    plan (that spec's offered plan of the run's workload), the evidence must be a run of it.
    The verdict is appended to the attempts index (default: beside the evidence root).
    """
    from .contract.summary import summarize_to_file
    from .evidence import attempts

    with job_log(log_path):
        run = read_run(run_json, spec_path)
        plan = None
        if plan_path is not None:
            from .plan.workloads import read_plan

            plan = read_plan(plan_path)
        log.info("summarizing %s -> %s", run.evidence_dir, out_path)
        summary = summarize_to_file(run.evidence_dir, Path(out_path), run_record=run.record, spec=run.spec, plan=plan)
        index = Path(attempts_index) if attempts_index is not None else attempts.index_for(run.evidence_dir.parent)
        attempts.append_event(index, "summarized", summary.get("run_id") or run.evidence_dir.name,
                              valid=summary["valid"], reasons=summary["reasons"], summary=str(out_path))
        log.info("valid=%s reasons=%s warnings=%s", summary["valid"], summary["reasons"], summary.get("warnings"))
        if infra_path is not None:
            write_run_infra(run, card_path, infra_path)
        return summary


def summarize_run_infra(run_json: str | Path, card_path: str | Path | None, out_path: str | Path,
                        spec_path: str | Path | None = None) -> dict[str, Any]:
    """run.json (+ the model's FLOPs card) -> the run's infrastructure summary (`bench probe summarize-run`)."""
    return write_run_infra(read_run(run_json, spec_path), card_path, out_path)


def write_run_infra(run: RunInputs, card_path: str | Path | None, out_path: str | Path) -> dict[str, Any]:
    """The run's infra summary (telemetry per phase, MFU), written atomically."""
    from .probes.run_infra import summarize_run_infra as infra_summary
    from .records.atomicfile import atomic_write_json
    from .records.jsonfile import read_json

    card = read_json(card_path, "FLOPs card") if card_path else None
    summary = infra_summary(run.evidence_dir, card)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, summary)
    log.info("infra summary %s: telemetry %s", out, summary["telemetry"]["status"])
    return summary


def render_report(summaries, plans, evidence_root, html, tables, figures, suite: str,
                  spec=None, log_path: str | Path | None = None, attempts_index=None,
                  stats_settings=None, run_infra=None, probes=None, eval_summaries=(),
                  offered_figures=None) -> None:
    """The report rule: summaries + plans + evidence root -> html, tables, figures."""
    from .report import render_report as render

    with job_log(log_path):
        render(
            summary_paths=list(summaries),
            plan_paths=list(plans),
            evidence_root=evidence_root,
            out_html=html,
            tables_dir=tables,
            figures_dir=figures,
            suite_name=suite,
            spec=spec,
            attempts_index=attempts_index,
            stats_settings=stats_settings,
            run_infra_paths=run_infra,
            probe_paths=probes,
            eval_summary_paths=list(eval_summaries),
            offered_figure_paths=list(offered_figures) if offered_figures else None,
        )
