"""The paper report: LaTeX tables, vector PDF figures and `paper.tex`, from the report's own tables.

`write_sources` turns the DataFrames the HTML report is built from (plus the
infrastructure and evaluation sections' tables when those stages ran) into
`tables/*.tex`, `figures/*.pdf` and a `paper.tex` that includes them; `compile_paper`
copies them into the paper directory and runs latexmk there on a private build
directory, keeping only `paper.pdf`. Everything is a function of retained evidence:
rows keep the suite's order, figures carry no dates, the TeX output no dates, ids or
paths (pdfTeX primitives in the template), so a rebuild is byte-identical.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import jinja2
import pandas as pd

from . import figures
from .build import fmt_num
from .files import write_output
from .latex import escape, latex_table

log = logging.getLogger(__name__)

#: What to install when latexmk is missing (Debian/Ubuntu package names; .ci/setup_tex.sh does it).
TEX_PACKAGES = ("latexmk", "texlive-latex-base", "texlive-latex-recommended")
TEX_INSTALL_HINT = (f"install TeX Live with latexmk: `sudo apt-get install --no-install-recommends {' '.join(TEX_PACKAGES)}` "
                    "(Debian/Ubuntu), or `sudo bash .ci/setup_tex.sh` from this repository")


class PaperBuildError(RuntimeError):
    """The paper could not be compiled; the message says why and what to do."""


@dataclass
class PaperInputs:
    """What the paper is made of: the report's tables and what it knows about the suite."""

    suite: str
    workloads: list[str]
    backends: list[str]
    tables: Mapping[str, pd.DataFrame]
    runs: list = field(default_factory=list)  # report.collect.Run, for the timelines figure
    plans: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    contract_text: str = ""
    description: str | None = None
    spec_id: str | None = None
    evidence_until: str | None = None
    #: Sections of stages that may not have run: {name: {table name: DataFrame}}.
    sections: Mapping[str, Mapping[str, pd.DataFrame]] = field(default_factory=dict)
    stats_settings: Any = None  # report.stats.StatsSettings (default: its defaults)


# --------------------------------------------------------------------------- numbers


def num(v: Any) -> str:
    """A rate or count in the HTML report's style; a missing value prints as an em dash (--- in TeX)."""
    return fmt_num(v)


def _with_ci(mean, low, high) -> str | None:
    if _missing(mean):
        return None
    if _missing(low) or _missing(high):
        return num(mean)
    return f"{num(mean)} [{num(low)}, {num(high)}]"


def _missing(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _pct(v) -> str:
    return f"{100 * float(v):.1f}\\%"


# --------------------------------------------------------------------------- tables


def _stats_rows(stats: pd.DataFrame, rate: str) -> pd.DataFrame:
    rows = stats[stats["rate"] == rate].copy()
    rows["value"] = [_with_ci(m, lo, hi) for m, lo, hi in zip(rows["mean"], rows["ci_low"], rows["ci_high"])]
    rows["trials_text"] = [f"{int(v)}/{int(n)}" for v, n in zip(rows["valid_trials"], rows["trials"])]
    return rows.reset_index(drop=True)


def headline_table(p: PaperInputs) -> str:
    stats = p.tables["trial_stats"]
    traj = _stats_rows(stats, "headline_trajectories_per_s")
    tok = _stats_rows(stats, "headline_assistant_tokens_per_s")
    df = traj[["workload", "backend", "trials_text"]].assign(traj=traj["value"], tok=tok["value"])
    conf = _confidence(stats)
    return latex_table(df, {"workload": "workload", "backend": "backend", "trials_text": "valid/trials",
                            "traj": "trajectories/s", "tok": "assistant tokens/s"}, align="llrrr",
                       caption=f"Headline end-to-end throughput: mean over valid trials [{conf} bootstrap CI].",
                       label="tab:headline", empty="No runs.")


def measured_table(p: PaperInputs) -> str:
    from .stats import StatsSettings, describe

    runs = p.tables["runs"]
    settings = p.stats_settings or StatsSettings()
    rows = []
    for (w, b), cell in runs.groupby(["workload", "backend"], sort=False):
        valid = cell[cell["valid"].astype(bool)]
        out = {"workload": w, "backend": b, "trials_text": f"{len(valid)}/{len(cell)}"}
        for col in ("measured_trajectories_per_s", "measured_assistant_tokens_per_s"):
            d = describe(valid[col].tolist(), settings)
            out[col] = _with_ci(d["mean"], d["ci_low"], d["ci_high"])
        rows.append(out)
    df = pd.DataFrame(rows, columns=["workload", "backend", "trials_text", "measured_trajectories_per_s",
                                     "measured_assistant_tokens_per_s"])
    return latex_table(df, {"workload": "workload", "backend": "backend", "trials_text": "valid/trials",
                            "measured_trajectories_per_s": "trajectories/s",
                            "measured_assistant_tokens_per_s": "assistant tokens/s"}, align="llrrr",
                       caption="Measured-window end-to-end throughput: mean over valid trials [bootstrap CI].",
                       label="tab:measured", empty="No runs.")


def trainer_table(p: PaperInputs) -> str:
    stats = p.tables["trial_stats"]
    rows = _stats_rows(stats, "trainer_assistant_tokens_per_s")
    conf = _confidence(stats)
    return latex_table(rows, {"workload": "workload", "backend": "backend", "trials_text": "valid/trials",
                              "value": f"assistant tokens/s [{conf} CI]", "std": "std", "cv": "CV"},
                       formats={"std": num, "cv": _pct}, align="llrrrr",
                       caption="Trainer throughput: headline assistant tokens over the union of all ranks' "
                               "trainer intervals.", label="tab:trainer", empty="No runs.")


def comparisons_table(p: PaperInputs) -> str:
    comp = p.tables["comparisons"]
    rows = comp.copy()
    rows["ratio_text"] = [_ci_ratio(r, lo, hi) for r, lo, hi in zip(rows["ratio"], rows["ci_low"], rows["ci_high"])]
    rows["pair"] = [f"{b} / {base}" for b, base in zip(rows["backend"], rows["baseline"])]
    return latex_table(rows, {"workload": "workload", "pair": "backends", "label": "rate", "ratio_text": "ratio [CI]",
                              "p_value": "Mann-Whitney p"}, formats={"p_value": lambda v: f"{float(v):.3g}"},
                       align="lllrr", caption="Ratios between backends (ratio of means, bootstrap CI) and the "
                                              "two-sided Mann-Whitney U test over valid trials.",
                       label="tab:comparisons", empty="Only one backend: no ratios.")


def _ci_ratio(r, lo, hi) -> str | None:
    if _missing(r):
        return None
    if _missing(lo) or _missing(hi):
        return f"{float(r):.2f}"
    return f"{float(r):.2f} [{float(lo):.2f}, {float(hi):.2f}]"


def _confidence(stats: pd.DataFrame) -> str:
    """The interval's level as plain text ("95%"): captions and headers are escaped later."""
    conf = stats["confidence"].dropna()
    return f"{100 * float(conf.iloc[0]):.0f}%" if len(conf) else "95%"


def validation_table(p: PaperInputs) -> str:
    runs = p.tables["runs"]
    attempts = p.tables.get("attempts")
    rows = []
    for (w, b), cell in runs.groupby(["workload", "backend"], sort=False):
        codes: dict[str, int] = {}
        for reasons in cell["reasons"].fillna(""):
            for r in [x for x in str(reasons).split("; ") if x]:
                code = r.split(":", 1)[0]
                codes[code] = codes.get(code, 0) + 1
        failed = None
        if attempts is not None and len(attempts):
            mine = attempts[(attempts["suite"] == p.suite) & (attempts["workload"] == w) & (attempts["backend"] == b)]
            failed = int(mine["failed_or_invalid"].astype(bool).sum())
        rows.append({"workload": w, "backend": b, "runs": len(cell), "valid": int(cell["valid"].astype(bool).sum()),
                     "attempts_failed": failed,
                     "reasons": ", ".join(f"{c} ({n})" for c, n in sorted(codes.items())) or "none"})
    df = pd.DataFrame(rows, columns=["workload", "backend", "runs", "valid", "attempts_failed", "reasons"])
    return latex_table(df, {"workload": "workload", "backend": "backend", "runs": "runs", "valid": "valid",
                            "attempts_failed": "failed/invalid attempts", "reasons": "reason codes (runs)"},
                       align="llrrrp{0.32\\linewidth}", caption="Validation: runs in the report, valid runs, every "
                       "failed or invalid attempt kept under the evidence root, and the reasons that invalidated runs.",
                       label="tab:validation", empty="No runs.")


def frame_table(df: pd.DataFrame, caption: str, label: str, drop: tuple[str, ...] = ("path",)) -> str:
    """Any section's DataFrame as it is (columns as headers), numbers in the report's style."""
    cols = [c for c in df.columns if c not in drop]
    formats = {c: num for c in cols if pd.api.types.is_float_dtype(df[c])}
    return latex_table(df, {c: c.replace("_", " ") for c in cols}, formats=formats, caption=caption, label=label,
                       align="l" * len(cols))


#: The throughput tables, in the paper's order: (file stem, builder, tables it needs).
THROUGHPUT_TABLES: tuple[tuple[str, Callable[[PaperInputs], str], tuple[str, ...]], ...] = (
    ("headline", headline_table, ("trial_stats",)),
    ("measured", measured_table, ("runs",)),
    ("trainer", trainer_table, ("trial_stats",)),
    ("comparisons", comparisons_table, ("comparisons",)),
    ("validation", validation_table, ("runs",)),
)


def latex_tables(p: PaperInputs) -> dict[str, str]:
    """Every table file of the paper: {relative path: LaTeX}, throughput first, then the stages' sections."""
    out = {}
    for stem, build, needs in THROUGHPUT_TABLES:
        missing = [n for n in needs if n not in p.tables]
        if missing:
            raise ValueError(f"paper table {stem} needs report table(s) {missing}")
        out[f"tables/{stem}.tex"] = build(p)
    unreadable = p.tables.get("unreadable")
    if unreadable is not None and len(unreadable):
        out["tables/unreadable.tex"] = frame_table(
            unreadable, "Declared summaries of a schema version this code cannot read: in no other table.",
            "tab:unreadable", drop=())
    for section in sorted(p.sections):
        for name, df in sorted(p.sections[section].items()):
            if df is not None and len(df):
                out[f"tables/{section}_{name}.tex"] = frame_table(
                    df, f"{section.capitalize()}: {name.replace('_', ' ')}.", f"tab:{section}:{name}")
    return out


# --------------------------------------------------------------------------- figures and document


def figure_files(p: PaperInputs) -> dict[str, bytes]:
    out = {}
    if p.runs:
        out["figures/timelines.pdf"] = figures.timelines_figure(p.runs, p.workloads, p.backends, "pdf")
    for w in p.workloads:
        if w in p.plans:
            out[f"figures/offered_{w}.pdf"] = figures.offered_figure(p.plans[w], w, "pdf")
    return out


def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rl_pipeline_bench", "templates"), undefined=jinja2.StrictUndefined,
        block_start_string="((*", block_end_string="*))", variable_start_string="(((",
        variable_end_string=")))", comment_start_string="((=", comment_end_string="=))",
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False,
    )
    env.filters["tex"] = escape
    return env.get_template("paper.tex.j2")


def paper_tex(p: PaperInputs, table_files: list[str], figure_names: list[str]) -> str:
    sections = {}
    for f in table_files:
        stem = Path(f).stem
        section = next((s for s in sorted(p.sections) if stem.startswith(f"{s}_")), None)
        if section:
            sections.setdefault(section, []).append(f)
    return _template().render(
        p=p, throughput=[f"tables/{stem}.tex" for stem, _, _ in THROUGHPUT_TABLES]
        + [f for f in table_files if f == "tables/unreadable.tex"],
        sections=sections, timelines="figures/timelines.pdf" in figure_names,
        offered=[w for w in p.workloads if f"figures/offered_{w}.pdf" in figure_names],
    )


def write_sources(p: PaperInputs, out_dir: Path | str) -> list[Path]:
    """tables/*.tex, figures/*.pdf and paper.tex under out_dir (atomic files); returns them, sorted."""
    out_dir = Path(out_dir)
    tables = latex_tables(p)
    figs = figure_files(p)
    files: dict[str, bytes] = {k: v.encode("utf-8") for k, v in tables.items()}
    files.update(figs)
    files["paper.tex"] = paper_tex(p, sorted(tables), sorted(figs)).encode("utf-8")
    written = []
    for rel in sorted(files):
        target = out_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        write_output(target, files[rel])
        written.append(target)
    return written


def compile_paper(sources: Path | str, out_dir: Path | str, latexmk: str | None = None) -> Path:
    """Copy the sources into out_dir and compile paper.tex there; only paper.pdf is added.

    latexmk runs in a private build directory (its logs and databases carry dates and
    paths), with SOURCE_DATE_EPOCH fixed. Raises PaperBuildError naming what to install
    when latexmk is missing, or the LaTeX error and the log's tail when it fails.
    """
    sources, out_dir = Path(sources), Path(out_dir)
    if not (sources / "paper.tex").is_file():
        raise PaperBuildError(f"{sources / 'paper.tex'} does not exist; write the sources first (bench paper sources)")
    exe = latexmk or shutil.which("latexmk")
    if exe is None:
        raise PaperBuildError(f"cannot compile {sources / 'paper.tex'}: latexmk is not installed. The tables, figures "
                              f"and paper.tex are written in {sources}/. To build paper.pdf, {TEX_INSTALL_HINT}.")
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in sorted(p for p in sources.rglob("*") if p.is_file()):
        target = out_dir / f.relative_to(sources)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_output(target, f.read_bytes())
    with tempfile.TemporaryDirectory(prefix="rl-bench-paper-") as build:
        env = dict(os.environ, SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1", TZ="UTC")
        proc = subprocess.run([exe, "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
                               f"-outdir={build}", "paper.tex"], cwd=out_dir, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        pdf = Path(build) / "paper.pdf"
        if proc.returncode != 0 or not pdf.is_file():
            log = Path(build) / "paper.log"
            tail = log.read_text(errors="replace")[-3000:] if log.is_file() else proc.stdout[-3000:]
            raise PaperBuildError(f"latexmk could not compile {out_dir / 'paper.tex'} (exit {proc.returncode}):\n{tail}")
        write_output(out_dir / "paper.pdf", pdf.read_bytes())
    return out_dir / "paper.pdf"


# --------------------------------------------------------------------------- from the report's inputs


def _eval_frames(summary_paths) -> dict[str, pd.DataFrame]:
    """Overall success rates, and per benchmark the measured rows beside the paper's (wide, in percent)."""
    from ..eval.tables import eval_tables, load_summaries, paper_wide

    summaries = load_summaries(list(summary_paths))
    if not summaries:
        return {}
    tabs = eval_tables(summaries)
    out = {"overall": tabs["eval_overall"]}
    for bench in sorted({s["benchmark"] for s in summaries}):
        if bench not in ("libero", "robotwin"):
            continue
        wide = paper_wide(tabs["eval_paper_comparison"], bench)
        rows = [{"row": ("paper: " if r["kind"] == "paper" else "") + str(r["row"]), "kind": r["kind"],
                 **{c: r["cells"][c] for c in wide["columns"]}} for r in wide["rows"]]
        out[f"{bench}_vs_paper"] = pd.DataFrame(rows, columns=["row", "kind", *wide["columns"]])
    return out


def _infra_frames(run_infra_paths, probe_paths) -> dict[str, pd.DataFrame]:
    from .infra import infra_tables, load_inputs

    tabs = infra_tables(load_inputs(run_infra_paths or [], probe_paths or []))
    return {name.removeprefix("infra_"): df for name, df in tabs.items()}


def paper_inputs(data, eval_summary_paths=(), run_infra_paths=None, probe_paths=None) -> PaperInputs:
    """The paper's inputs from the report's (report.build.ReportData), plus the stages' sections."""
    from .build import contract_context

    sections: dict[str, dict[str, pd.DataFrame]] = {}
    evals = _eval_frames(eval_summary_paths or [])
    if evals:
        sections["evaluation"] = evals
    if run_infra_paths is not None or probe_paths is not None:
        sections["infrastructure"] = _infra_frames(run_infra_paths, probe_paths)
    return PaperInputs(
        suite=data.suite, workloads=data.workloads, backends=data.backends, tables=data.tabs, runs=data.runs,
        plans=data.plans, contract_text=contract_context(data.runs, data.suite_settings)["statement"],
        description=(data.suite_settings or {}).get("description"),
        spec_id=data.spec.id if data.spec is not None else None, evidence_until=data.evidence_until,
        sections=sections, stats_settings=data.stats_settings,
    )


def render_paper_sources(summary_paths, plan_paths, evidence_root, out_dir, suite_name: str, spec=None,
                         attempts_index=None, stats_settings=None, eval_summary_paths=(), run_infra_paths=None,
                         probe_paths=None) -> list[Path]:
    """The paper's sources (tables/*.tex, figures/*.pdf, paper.tex) from the HTML report's inputs.

    Reads summaries, plans, the attempts index and evidence timelines exactly as the HTML
    report does (report.build.collect_report); never runs a benchmark.
    """
    from .build import collect_report

    t0 = time.monotonic()
    data = collect_report(summary_paths, plan_paths, evidence_root, suite_name, spec, attempts_index, stats_settings)
    written = write_sources(paper_inputs(data, eval_summary_paths, run_infra_paths, probe_paths), out_dir)
    log.info("wrote %d paper source file(s) under %s from %d run(s) in %.2f s", len(written), out_dir,
             len(data.runs), time.monotonic() - t0)
    return written
