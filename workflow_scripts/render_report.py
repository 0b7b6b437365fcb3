"""Snakemake script for rule render_report: a thin wrapper over rl_pipeline_bench.report."""

import logging

from rl_pipeline_bench.report import render_report

handler = logging.FileHandler(snakemake.log[0], mode="w", encoding="utf-8")  # noqa: F821
handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
log = logging.getLogger("rl_pipeline_bench")
log.addHandler(handler)
log.setLevel(logging.INFO)
try:
    render_report(
        summary_paths=list(snakemake.input.summaries),  # noqa: F821
        plan_paths=list(snakemake.input.plans),  # noqa: F821
        evidence_root=snakemake.params.evidence_root,  # noqa: F821
        out_html=snakemake.output.html,  # noqa: F821
        tables_dir=snakemake.output.tables,  # noqa: F821
        figures_dir=snakemake.output.figures,  # noqa: F821
        suite_name=snakemake.params.suite,  # noqa: F821
        config=snakemake.config,  # noqa: F821
    )
except Exception:
    log.exception("rendering the report failed")
    raise
finally:
    log.removeHandler(handler)
    handler.close()
