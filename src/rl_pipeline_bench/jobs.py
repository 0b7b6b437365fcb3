"""Entry points of the workflow's light rules (summaries, report), run as `bench` commands.

Measured on a 2-core machine: a `script:` job re-imports Snakemake (seconds), and a
`run:` block imports pandas/matplotlib inside Snakemake's own busy process several
times slower than a fresh interpreter does. So the rules call `bench summarize-run`
and `bench report`, and these functions do the work with their log records going
to the job's log file (or stderr).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
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


def summarize_run(run_json: str | Path, out_path: str | Path, log_path: str | Path | None = None,
                  spec_path: str | Path | None = None, attempts_index: str | Path | None = None) -> dict[str, Any]:
    """run.json -> summary.json with the contract code; never re-runs a benchmark.

    With a spec, the run record and the evidence manifest must both name its hash. The
    verdict is appended to the attempts index (default: beside the evidence root).
    """
    from .evidence import attempts
    from .contract.summary import summarize_to_file
    from .paths import require_regular_file

    run_json = Path(run_json)
    with job_log(log_path):
        try:
            require_regular_file(run_json, "run record")
            record = json.loads(run_json.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RunRecordError(f"{run_json}: not a readable run record ({exc})") from None
        evidence_dir = record.get("evidence_dir") if isinstance(record, dict) else None
        if not evidence_dir or not isinstance(evidence_dir, str):
            raise RunRecordError(f"{run_json}: no usable 'evidence_dir' (a path); cannot locate the run's evidence")
        if spec_path is not None:
            from .settings.spec import check_run_spec

            check_run_spec(record, run_json, Path(evidence_dir), spec_path)
        log.info("summarizing %s -> %s", evidence_dir, out_path)
        summary = summarize_to_file(Path(evidence_dir), Path(out_path), run_record=record)
        index = Path(attempts_index) if attempts_index is not None else attempts.index_for(Path(evidence_dir).parent)
        attempts.append_event(index, "summarized", summary.get("run_id") or Path(evidence_dir).name,
                              valid=summary["valid"], reasons=summary["reasons"], summary=str(out_path))
        log.info("valid=%s reasons=%s warnings=%s", summary["valid"], summary["reasons"], summary.get("warnings"))
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
