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
import numpy as np
import pandas as pd

from .. import paths
from . import figures
from .build import fmt_num, fmt_when
from .files import write_output
from .latex import escape, latex_table

log = logging.getLogger(__name__)

#: What to install when latexmk is missing (Debian/Ubuntu package names; .ci/setup_tex.sh does it).
TEX_PACKAGES = ("latexmk", "texlive-latex-base", "texlive-latex-recommended", "lmodern")
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
    """A rate or count in the HTML report's style as TeX: never e-notation (1.2e-05 is $1.2\\times10^{-5}$)."""
    text = fmt_num(v)
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    return f"${mantissa}\\times10^{{{int(exponent)}}}$"


def count(v: Any) -> str:
    """A whole number with its thousands set apart by thin spaces (1\\,048\\,576), as a byte count reads."""
    return f"{int(v):,}".replace(",", "\\,")


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


def _rates_with_cv(p: PaperInputs, rates: tuple[str, str], caption: str, label: str) -> str:
    """Two rates per workload x backend: mean [CI] and the CV of each, as the HTML report shows them."""
    stats = p.tables["trial_stats"]
    first, second = (_stats_rows(stats, r) for r in rates)
    df = first[["workload", "backend", "trials_text"]].assign(
        traj=first["value"], traj_cv=first["cv"], tok=second["value"], tok_cv=second["cv"])
    conf = _confidence(stats)
    return latex_table(df, {"workload": "workload", "backend": "backend", "trials_text": "valid/trials",
                            "traj": f"traj./s [{conf} CI]", "traj_cv": "CV traj.",
                            "tok": f"asst. tokens/s [{conf} CI]", "tok_cv": "CV tokens"},
                       formats={"traj_cv": _pct, "tok_cv": _pct}, align="llrrrrr", caption=caption, label=label,
                       empty="No runs.")


def headline_table(p: PaperInputs) -> str:
    return _rates_with_cv(p, ("headline_trajectories_per_s", "headline_assistant_tokens_per_s"),
                          "Headline end-to-end throughput: mean over valid trials [bootstrap CI] and the "
                          "coefficient of variation over trials. The next table says what changes how each row "
                          "reads.", "tab:headline")


def measured_table(p: PaperInputs) -> str:
    return _rates_with_cv(p, ("measured_trajectories_per_s", "measured_assistant_tokens_per_s"),
                          "Measured-window end-to-end throughput: mean over valid trials [bootstrap CI] and the "
                          "coefficient of variation over trials.", "tab:measured")


def notes_table(p: PaperInputs) -> str:
    """The caveats of every headline row, in the HTML report's words (report.reading): trials left out,
    too few trials, noisy rates, a headline window that measured a drain."""
    from . import reading
    from .build import _SHORT_RATES
    from .stats import HEADLINE_RATES, StatsSettings

    settings = p.stats_settings or StatsSettings()
    stats = p.tables["trial_stats"]
    rows = []
    for (w, b), cell in stats.groupby(["workload", "backend"], sort=False):
        judged = [r for r in cell.to_dict("records") if r["rate"] in dict(HEADLINE_RATES)]
        runs = [r for r in p.runs if r.key[0] == w and r.key[1] == b]
        notes = reading.cell_notes(runs, judged, settings, _SHORT_RATES)
        rows.append({"workload": w, "backend": b, "trials_text": f"{int(cell['valid_trials'].iloc[0])}/"
                     f"{int(cell['trials'].iloc[0])}", "notes": "; ".join(n["text"] for n in notes) or "none"})
    df = pd.DataFrame(rows, columns=["workload", "backend", "trials_text", "notes"])
    return latex_table(df, {"workload": "workload", "backend": "backend", "trials_text": "valid/trials",
                            "notes": "what changes how the row reads"}, align="llr" + _wrapped(0.55),
                       caption=f"Noise warnings and caveats per headline row (a CV above "
                               f"{100 * settings.cv_bound:.0f} %, fewer than {settings.min_trials} valid trials, "
                               "invalid trials left out, generation that stopped before the headline window ended).",
                       label="tab:notes", empty="No runs.")


def activity_table(p: PaperInputs) -> str:
    """Rollout activity in each run's headline window: whether the headline rate is a steady-state rate."""
    act = p.tables["activity"].copy()
    act["warning_codes"] = [", ".join(sorted({w.split(":", 1)[0].strip() for w in str(x).split(" | ") if w.strip()}))
                            or "none" for x in act["warnings"].fillna("")]
    act["in_flight"] = [None if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                        else ("yes" if v else "no") for v in act["in_flight_at_end"]]
    return latex_table(act, {"workload": "workload", "backend": "backend", "trial": "trial",
                             "headline_window_s": "window s", "busy_share": "busy share",
                             "calls_finished": "calls finished", "in_flight": "in flight at end",
                             "idle_tail_s": "idle tail s", "warning_codes": "warnings"},
                       formats={"headline_window_s": num, "busy_share": _pct, "idle_tail_s": num},
                       align="llrrrrlrl",
                       caption="Rollout activity in the headline window: the share of it with a model call in "
                               "flight, calls finished in it, and the idle tail before its end. "
                               "generation_stopped_early means the window measured a drain.",
                       label="tab:activity", empty="No runs.", small=True)


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
    from . import reading
    from .stats import StatsSettings

    comp = p.tables["comparisons"]
    rows = comp.copy()
    rows["ratio_text"] = [_ci_ratio(r, lo, hi) for r, lo, hi in zip(rows["ratio"], rows["ci_low"], rows["ci_high"])]
    rows["pair"] = [f"{b} / {base}" for b, base in zip(rows["backend"], rows["baseline"])]
    return latex_table(rows, {"workload": "workload", "pair": "backends", "label": "rate", "ratio_text": "ratio [CI]",
                              "p_value": "Mann-Whitney p", "verdict": "verdict"},
                       formats={"p_value": lambda v: f"{float(v):.3g}"},
                       align="lllrrl", caption="Ratios between backends (ratio of means, bootstrap CI), the "
                                               "two-sided Mann-Whitney U test over valid trials, and the verdict. "
                                               + reading.comparison_rule(p.stats_settings or StatsSettings()),
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
                       align="llrrrp{0.28\\linewidth}", caption="Validation: runs in the report, valid runs, every "
                       "failed or invalid attempt kept under the evidence root, and the reasons that invalidated runs.",
                       label="tab:validation", empty="No runs.")


#: Unit words of the CSV column names, as the HTML report writes them.
_UNITS = {"gbps": "GB/s", "tflops": "TFLOP/s", "pct": "%", "mib": "MiB", "us": "(µs)", "w": "W", "mhz": "MHz"}


def header_text(column: str) -> str:
    """A CSV column name as a table header: words, units as the HTML report writes them (mb_per_s: MB/s)."""
    return " ".join(_UNITS.get(w, w) for w in column.replace("mb_per_s", "MB/s").split("_"))


def _wrapped(share: float) -> str:
    return r">{\raggedright\arraybackslash}p{" + f"{share:g}" + r"\linewidth}"


#: The stages' tables as the paper shows them: column -> (header, wrap), wrap a share of the line for
#: a text column set as a paragraph, None for one line. The rest of a table's columns (ids, paths,
#: repeated settings) are in its CSV, reports/tables/infra_NAME.csv, which the caption names.
PAPER_COLUMNS: dict[str, dict[str, tuple[str, float | None]]] = {
    "telemetry": {"workload": ("workload", None), "backend": ("backend", None), "trial": ("trial", None),
                  "telemetry_status": ("telemetry", None), "telemetry_reason": ("reason", 0.16),
                  "gpu_index": ("GPU", None), "update_gpu_util_mean": ("update util %", 0.07),
                  "update_gpu_util_met": ("> 70 %", None), "memory_used_peak_pct": ("peak memory %", 0.07),
                  "memory_used_met": ("> 80 %", None), "sampler_busy_pct": ("sampler busy %", 0.07)},
    "utilisation": {"workload": ("workload", None), "backend": ("backend", None), "trial": ("trial", None),
                    "gpu_index": ("GPU", None), "phase": ("phase", None), "util_samples": ("samples", None),
                    "gpu_util_mean": ("util mean %", None), "gpu_util_p50": ("p50", None),
                    "gpu_util_p90": ("p90", None), "memory_used_peak_pct": ("peak memory %", None),
                    "power_mean_w": ("power W", None)},
    "trainer_efficiency": {"workload": ("workload", None), "backend": ("backend", None), "trial": ("trial", None),
                           "status": ("status", None), "reason": ("reason", 0.16), "tokens": ("tokens", None),
                           "flops_per_token": ("FLOPs/token", None), "achieved_tflops": ("TFLOP/s", None),
                           "device_name": ("device", 0.12), "mfu_datasheet": ("MFU (datasheet)", 0.08),
                           "mfu_measured": ("MFU (measured)", 0.08)},
    "allreduce": {"label": ("probe", None), "backend": ("backend", None), "world_size": ("ranks", None),
                  "dtype": ("dtype", None), "bytes": ("bytes", None), "time_us": ("time (µs)", None),
                  "algbw_gbps": ("algbw GB/s", None), "busbw_gbps": ("busbw GB/s", None)},
    "allreduce_expectations": {"label": ("probe", None), "expectation": ("expectation", 0.15),
                               "expected": ("expected", 0.12),
                               "measured_busbw_gbps": ("busbw GB/s", None), "verdict": ("verdict", 0.2)},
    "storage": {"label": ("probe", None), "filesystem": ("filesystem", None), "engine": ("engine", None),
                "direct": ("O_DIRECT", None), "direction": ("direction", None), "size_bytes": ("bytes", None),
                "mb_per_s": ("MB/s", None), "target": ("target", None), "met": ("met", None)},
    "checkpoint": {"label": ("probe", None), "device": ("device", None), "item": ("item", None),
                   "operation": ("operation", None), "bytes": ("bytes", None), "seconds": ("seconds", None),
                   "mb_per_s": ("MB/s", None), "target": ("target", None), "met": ("met", None)},
    "gemm": {"label": ("probe", None), "device_name": ("device", 0.25), "n": ("n", None), "dtype": ("dtype", None),
             "iters": ("iterations", None), "seconds": ("seconds", None), "tflops": ("TFLOP/s", None)},
    "targets": {"label": ("target", 0.17), "comparison": ("", None), "threshold": ("threshold", None),
                "unit": ("unit", None), "statistic": ("statistic", 0.28), "source": ("source", 0.25)},
}

def _booleans(col: pd.Series) -> bool:
    values = col.dropna()
    return len(values) > 0 and all(isinstance(v, (bool, np.bool_)) for v in values)


def _yes_no(v) -> str:
    return "yes" if v else "no"


#: A `[H]` table does not break across pages: longer frames are set as several tables ("continued").
ROWS_PER_TABLE = 25

#: Columns whose every row says the same long thing: said once under the table.
PAPER_NOTES = {"trainer_efficiency": "notes"}


def frame_table(df: pd.DataFrame, caption: str, label: str, drop: tuple[str, ...] = ("path",),
                columns: Mapping[str, tuple[str, float | None]] | None = None, note_column: str | None = None,
                csv_name: str | None = None) -> str:
    """A section's DataFrame as a table, numbers in the report's style.

    `columns` (PAPER_COLUMNS) picks and names the columns and wraps the long ones;
    without it every column but `drop` is shown, headed by its name. `note_column`'s
    distinct values are said once under the table, and the CSV (`csv_name`) that holds
    the columns left out is named there.
    """
    if columns is None:
        columns = {c: (header_text(c), None) for c in df.columns if c not in drop}
    # A column with no value in any row says nothing here (it stays in the CSV).
    columns = {c: spec for c, spec in columns.items() if c in df.columns and (df.empty or df[c].notna().any())}
    formats = {c: num for c in columns if pd.api.types.is_float_dtype(df[c])}
    formats |= {c: count for c in columns if c.endswith("bytes") and pd.api.types.is_integer_dtype(df[c])}
    formats |= {c: _yes_no for c in columns if _booleans(df[c])}
    align = "".join(_wrapped(w) if w else ("r" if c in formats else "l") for c, (_, w) in columns.items())
    notes = []
    if note_column and note_column in df.columns:
        notes = [n.rstrip(".") + "." for n in dict.fromkeys(df[note_column].dropna().astype(str)) if n]
    if csv_name and len(columns) < len(df.columns):
        notes.append(f"Every column: {paths.REPORT_TABLES}/{csv_name}.csv.")
    note = " ".join(notes) or None
    headers = {c: h for c, (h, _) in columns.items()}
    parts = [df.iloc[i:i + ROWS_PER_TABLE] for i in range(0, max(len(df), 1), ROWS_PER_TABLE)]
    return "".join(latex_table(part, headers, formats=formats, caption=caption if k == 0 else f"{caption} (continued)",
                               label=label if k == 0 else None, align=align, note=note if k == len(parts) - 1 else None,
                               small=True) for k, part in enumerate(parts))


#: The throughput tables, in the paper's order: (file stem, builder, tables it needs).
THROUGHPUT_TABLES: tuple[tuple[str, Callable[[PaperInputs], str], tuple[str, ...]], ...] = (
    ("headline", headline_table, ("trial_stats",)),
    ("notes", notes_table, ("trial_stats",)),
    ("measured", measured_table, ("trial_stats",)),
    ("trainer", trainer_table, ("trial_stats",)),
    ("comparisons", comparisons_table, ("comparisons",)),
    ("activity", activity_table, ("activity",)),
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
                    df, f"{section.capitalize()}: {name.replace('_', ' ')}.", f"tab:{section}:{name}",
                    columns=PAPER_COLUMNS.get(name) if section == "infrastructure" else None,
                    note_column=PAPER_NOTES.get(name) if section == "infrastructure" else None,
                    csv_name=f"infra_{name}" if section == "infrastructure" else None)
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
    env.filters["when"] = fmt_when
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
