"""render_report: summaries + plans + evidence root -> comparison.html, tables/*.csv, figures/*.png.

A pure function of retained evidence: it never runs a benchmark, writes no wall-clock
time (the only date shown is the newest evidence `finished_at`), and sorts every row.
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from .. import paths
from . import figures, reading, tables
from ..eval.report_section import section as eval_section
from .collect import OFFERED_QUANTITIES, ReportInputError, load_attempts, load_plans, load_runs
from ..contract.settings import KEYS as CONTRACT_KEYS, ContractSettings
from .files import data_uri, write_output
from .stats import HEADLINE_RATES, StatsSettings
from .tables import template_records

log = logging.getLogger(__name__)

def _order(preferred: list[str], seen: list[str]) -> list[str]:
    """The configured order first, then anything else in order of first appearance."""
    out = [x for x in preferred if x in seen]
    for x in seen:
        if x not in out:
            out.append(x)
    return out


def _contract_text(c: dict) -> str:
    settings = ContractSettings.recorded(c)
    return settings.describe() if settings else "unknown (summary lacks contract settings)"


def contract_context(runs, suite_settings: dict | None) -> dict[str, Any]:
    used: dict[tuple, list[str]] = {}
    for r in runs:
        c = r.summary.get("contract") or {}
        used.setdefault(tuple(c.get(k) for k in CONTRACT_KEYS), []).append(
            f"{r.key[1]}/{r.key[0]}/trial{r.key[2]}")
    default = ContractSettings().settings()
    default_key = tuple(default[k] for k in CONTRACT_KEYS)
    configured = (suite_settings or {}).get("contract")
    variants = [{"settings": dict(zip(CONTRACT_KEYS, k)), "text": _contract_text(dict(zip(CONTRACT_KEYS, k))),
                 "runs": sorted(v), "is_default": k == default_key} for k, v in sorted(used.items(), key=lambda kv: str(kv[0]))]
    if not variants:
        statement = "No runs, so no contract settings were used."
    elif len(variants) == 1 and variants[0]["is_default"]:
        statement = "All runs used the default contract: " + variants[0]["text"] + "."
    elif len(variants) == 1:
        statement = ("These runs did NOT use the default contract (" + _contract_text(default) + "). They used "
                     + variants[0]["text"] + ". Their rates are not comparable with default-contract results.")
    else:
        statement = ("Runs in this report used DIFFERENT contract settings (listed below); rates from different "
                     "contracts are not comparable.")
    mismatch = []
    if configured:
        ck = tuple(configured.get(k) for k in CONTRACT_KEYS)
        for v in variants:
            if tuple(v["settings"][k] for k in CONTRACT_KEYS) != ck:
                mismatch.extend(v["runs"])
    return {"variants": variants, "statement": statement, "configured": configured,
            "configured_text": _contract_text(configured) if configured else None,
            "default_text": _contract_text(default), "mismatch": sorted(mismatch)}


PROVENANCE_FIELDS = (("model", "model"), ("recipe_sha256", "recipe sha256"), ("source_sha256", "source sha256"),
                     ("image", "image"), ("host", "host"), ("gpus", "GPUs"), ("command", "command"))


def provenance_context(run_rows: list[dict]) -> dict[str, list[dict]]:
    """Split provenance into fields shared by every run (shown once) and fields that vary."""
    common, varying = [], []
    for key, label in PROVENANCE_FIELDS:
        values = {row[key] for row in run_rows}
        if len(run_rows) > 1 and len(values) == 1:
            common.append({"key": key, "label": label, "value": run_rows[0][key]})
        else:
            varying.append({"key": key, "label": label})
    return {"common": common, "varying": varying}


def fmt_num(x: Any) -> str:
    v = tables._num(x)
    if v is None:
        return "—"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def fmt_spread(x: Any) -> str:
    """A standard deviation beside its mean: two significant digits (0.033, 27, 1,400)."""
    v = tables._num(x)
    if v is None:
        return "—"
    if v == 0:
        return "0"
    text = f"{float(f'{v:.2g}'):,.{max(0, 1 - math.floor(math.log10(abs(v))))}f}"
    return text


def fmt_tokens(x: Any) -> str:
    v = tables._num(x)
    if v is None:
        return "—"
    return f"{int(v):,}" if v.is_integer() else f"{v:,.1f}"


def fmt_pct(x: Any) -> str:
    v = tables._num(x)
    return "—" if v is None else f"{100 * v:.1f} %"


def fmt_p(x: Any) -> str:
    v = tables._num(x)
    return "—" if v is None else f"{v:.3g}"


def fmt_ratio(x: Any) -> str:
    v = tables._num(x)
    return "—" if v is None else f"{v:.2f}×"


def fmt_when(x: Any) -> str:
    """An evidence timestamp (UTC ISO 8601) as a reader writes it: 2026-12-01 21:45:01 UTC."""
    if not x:
        return "—"
    from datetime import datetime, timezone

    try:
        t = datetime.fromisoformat(str(x).replace("Z", "+00:00"))
    except ValueError:
        return str(x)
    t = t.astimezone(timezone.utc) if t.tzinfo else t
    return t.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if t.tzinfo else "")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rl_pipeline_bench", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = fmt_num
    env.filters["ratio"] = fmt_ratio
    env.filters["tokens"] = fmt_tokens
    env.filters["pct"] = fmt_pct
    env.filters["p"] = fmt_p
    env.filters["when"] = fmt_when
    env.filters["spread"] = fmt_spread
    return env


def _suite_settings(spec) -> dict | None:
    """What the report states about the suite, from its resolved run spec."""
    if spec is None:
        return None
    s = spec.settings
    about = spec.doc.get("about") or {}
    return {
        "description": about.get("description"), "backends": s["backends"], "workloads": s["workloads"],
        "trials": spec.trials, "scale": s["scale"], "model": s["model"]["name"], "runtime": s["runtime"],
        "device": s["device"], "gpus": s["gpus"], "gpu_sets": about.get("gpu_sets") or [],
        "contract": s["contract"],
    }


def _check_spec(runs, spec) -> None:
    """Every summary must come from evidence of this spec; name both hashes otherwise.

    A run whose manifest is unreadable names no spec; it is shown, as invalid, under its run path.
    """
    if spec is None:
        return
    for r in runs:
        named = r.summary.get("spec") if isinstance(r.summary.get("spec"), dict) else {}
        unreadable = any(str(x).startswith(("manifest_missing", "manifest_corrupt", "evidence_dir_missing"))
                         for x in r.summary.get("reasons") or [])
        if named.get("hash") != spec.hash and not (unreadable and not named):
            raise ReportInputError(f"summary {r.summary_path} is of spec hash {named.get('hash')}, but the report "
                                   f"is rendered for spec {spec.id} (hash {spec.hash})")


def _offered_figures(plans: dict, paths: list | None) -> dict[str, bytes]:
    """The plan rule's figures by workload (paths in the order of the plans), read once."""
    if paths is None:
        return {}
    if len(paths) != len(plans):
        raise ReportInputError(f"{len(paths)} offered-length figure(s) for {len(plans)} plan(s); give one per plan, "
                               "in the order of the plans")
    out = {}
    for w, p in zip(plans, paths):
        try:
            out[w] = Path(p).read_bytes()
        except OSError as exc:
            raise ReportInputError(f"offered-length figure {p} is not readable: {exc}") from None
    return out


def _write_figures(runs, plans, workloads, backends, figures_dir: Path,
                   drawn: dict[str, bytes]) -> tuple[bytes | None, dict[str, bytes]]:
    figures_dir.mkdir(parents=True, exist_ok=True)
    timeline = figures.timelines_figure(runs, workloads, backends) if runs else None
    if timeline is not None:
        write_output(figures_dir / "timelines.png", timeline)
    offered = {}
    for w in workloads:
        if w in plans:
            offered[w] = drawn[w] if w in drawn else figures.offered_figure(plans[w], w)
            write_output(figures_dir / f"offered_{_safe(w)}.png", offered[w])
    return timeline, offered


def _grouped_stats(df: pd.DataFrame, keys: list[str]) -> list[dict]:
    """Long statistics rows (one per rate) grouped into one row per key, rates as a dict."""
    out: list[dict] = []
    for rec in template_records(df):
        key = tuple(rec[k] for k in keys)
        if not out or tuple(out[-1][k] for k in keys) != key:
            out.append({**{k: rec[k] for k in keys}, **{k: rec.get(k) for k in ("trials", "valid_trials", "n",
                        "n_baseline", "warnings", "noisy", "note", "baseline") if k in rec}, "rates": {}})
        out[-1]["rates"][rec["rate"]] = rec
    return out


#: Short names of the rates in the notes beside a headline number.
_SHORT_RATES = {"headline_trajectories_per_s": "traj/s", "headline_assistant_tokens_per_s": "tokens/s",
                "trainer_assistant_tokens_per_s": "trainer", "measured_trajectories_per_s": "measured traj/s",
                "measured_assistant_tokens_per_s": "measured tokens/s"}


def _headline_cells(data: ReportData) -> list[dict]:
    """The headline rows with each rate's spread (std, CV, interval over valid trials) and the notes that
    change how the row reads (report.reading), so the first screen carries its uncertainty."""
    stats_rows: dict[tuple, list[dict]] = {}
    for rec in template_records(data.tabs["trial_stats"]):
        stats_rows.setdefault((rec["workload"], rec["backend"]), []).append(rec)
    runs: dict[tuple, list] = {}
    for r in data.runs:
        runs.setdefault((r.key[0], r.key[1]), []).append(r)
    cells = []
    for h in template_records(data.tabs["headline"]):
        key = (h["workload"], h["backend"])
        rows = stats_rows.get(key, [])
        judged = [row for row in rows if row["rate"] in dict(HEADLINE_RATES)]
        cells.append({**h, "spread": {row["rate"]: row for row in rows},
                      "notes": reading.cell_notes(runs.get(key, []), judged, data.stats_settings, _SHORT_RATES)})
    return cells


def _comparison_rows(data: ReportData) -> list[dict]:
    """The comparisons grouped per workload and backend pair, with the reasons a pair is not resolved,
    each once: a reason of every rate alone, another followed by the rates it holds for."""
    grouped = _grouped_stats(data.tabs["comparisons"], ["workload", "backend"])
    for g in grouped:
        rates: dict[str, list[str]] = {}
        for c, _ in HEADLINE_RATES:
            for x in (g["rates"].get(c, {}).get("verdict_reasons") or "").split(" | "):
                if x:
                    rates.setdefault(x, []).append(_SHORT_RATES[c])
        every = len([c for c, _ in HEADLINE_RATES if c in g["rates"]])
        g["reasons"] = [x if len(r) == every else f"{x} ({', '.join(r)})" for x, r in rates.items()]
    return grouped


def _other_trials(data: ReportData) -> list[dict]:
    """Summaries of this report's spec on disk that it does not show (a trial count lowered since, say)."""
    if data.spec is None:
        return []
    shown = {Path(r.summary_path).resolve() for r in data.runs}
    # The spec's run directory, where the shown summaries are (results/runs/{spec}/{backend}/{workload}/trial{n}).
    roots = {p.parents[3] for p in shown if len(p.parents) > 3 and p.parents[3].name == data.spec.id}
    found = []
    for path in sorted(q for root in roots for q in root.glob("*/*/trial*/summary.json")):
        if path.resolve() in shown:
            continue
        backend, workload, trial = path.parts[-4], path.parts[-3], path.parts[-2].removeprefix("trial")
        if trial.isdigit():
            found.append({"backend": backend, "workload": workload, "trial": int(trial), "path": str(path)})
    return sorted(found, key=lambda x: (x["trial"], x["workload"], x["backend"]))


def _context(data: ReportData, timeline, offered_png, attempts_index=None) -> dict[str, Any]:
    suite_name, suite_settings, spec, evidence_root = data.suite, data.suite_settings, data.spec, data.evidence_root
    runs, attempts, workloads, backends, tabs = data.runs, data.attempts, data.workloads, data.backends, data.tabs
    labels = dict(OFFERED_QUANTITIES)
    offered = []
    for w in workloads:
        stats = template_records(tabs["offered"][tabs["offered"]["workload"] == w])
        for st in stats:
            st["label"] = labels[st["quantity"]]
        png = offered_png.get(w)
        offered.append({"workload": w, "img": data_uri(png) if png else None, "stats": stats})
    run_rows = template_records(tabs["runs"])
    for row, r in zip(run_rows, runs):
        row["reason_list"] = [str(x) for x in r.summary.get("reasons") or []]
        row["report_problems"] = r.problems
    workload_desc = ((spec.doc.get("about") or {}).get("workload_descriptions") or {}) if spec else {}
    return {
        "suite": suite_name,
        "suite_settings": suite_settings,
        "description": (suite_settings or {}).get("description"),
        "evidence_root": str(evidence_root),
        "evidence_root_exists": evidence_root.is_dir(),
        "evidence_until": data.evidence_until,
        "workloads": workloads,
        "workload_desc": {w: workload_desc.get(w) for w in workloads},
        # the trial count is not part of the spec's identity: show the trials this report holds
        "spec": {**spec.doc, "trials": max((r.key[2] for r in runs), default=spec.trials)} if spec else None,
        "spec_file": str(paths.spec_file(spec.id)) if spec is not None else None,
        "spec_runs_dir": str(paths.spec_runs_dir(spec.id)) if spec is not None else None,
        "backends": backends,
        "contract": contract_context(runs, suite_settings),
        "headline": _headline_cells(data),
        "other_trials": _other_trials(data),
        "report_target": paths.REPORT_HTML,
        "ratios": template_records(tabs["ratios"]),
        "runs": run_rows,
        "provenance": provenance_context(run_rows),
        "n_valid": sum(1 for r in runs if r.summary["valid"] is True),
        "timeline_img": data_uri(timeline) if timeline is not None else None,
        "offered": offered,
        "attempts": [a for a in attempts if a.failed_or_invalid],
        "n_attempts": len(attempts),
        "attempts_index": str(attempts_index) if attempts_index else None,
        "rate_columns": tables.RATE_COLUMNS,
        "stat_rates": HEADLINE_RATES,
        "stats_settings": data.stats_settings,
        "trial_stats": _grouped_stats(tabs["trial_stats"], ["workload", "backend"]),
        "comparisons": _comparison_rows(data),
        "reading_rule": reading.comparison_rule(data.stats_settings),
        "measured_rates": tables.MEASURED_RATES,
        "activity": template_records(tabs["activity"]),
        "unreadable": data.unreadable,
    }


@dataclass
class ReportData:
    """Everything both reports (HTML and paper) are made of, read once from the inputs."""

    suite: str
    spec: Any
    suite_settings: dict | None
    stats_settings: StatsSettings
    evidence_root: Path
    runs: list
    plans: dict
    attempts: list
    workloads: list[str]
    backends: list[str]
    tabs: dict[str, pd.DataFrame]
    unreadable: list = field(default_factory=list)  # report.collect.UnreadableRun

    @property
    def evidence_until(self) -> str | None:
        """The newest evidence `finished_at`: the only date either report shows."""
        finished = [str(f) for r in self.runs if (f := tables.get(r.summary, "provenance", "finished_at"))]
        return max(finished) if finished else None


def collect_report(summary_paths, plan_paths, evidence_root, suite_name: str, spec=None, attempts_index=None,
                   stats_settings=None) -> ReportData:
    """Read summaries, plans and the attempts index and build every throughput table.

    `spec` (the suite's RunSpec) supplies the description, the configured contract,
    the backend/workload order and the settings shown; every summary must be of its
    hash. The first backend listed is the baseline of the ratios. Without a spec,
    backends keep the order of the summaries. `attempts_index` (paths.ATTEMPTS_INDEX)
    lists every attempt, failed ones included; nothing is re-scored. `stats_settings`
    (report.stats.StatsSettings, default: its defaults) bounds the noise warnings.
    """
    from ..settings.spec import RunSpec

    if spec is not None and not isinstance(spec, RunSpec):
        raise TypeError(f"render_report takes the suite's RunSpec (rl_pipeline_bench.settings.spec.load_spec), "
                        f"not a {type(spec).__name__}: the report reads the resolved spec, never the config")
    stats_settings = stats_settings or StatsSettings()
    evidence_root = Path(evidence_root)
    if spec is not None and spec.suite_name != suite_name:
        raise ReportInputError(f"spec {spec.id} is of suite {spec.suite_name!r}, not {suite_name!r}")
    suite_settings = _suite_settings(spec)

    runs, unreadable = load_runs(list(summary_paths), evidence_root)
    for u in unreadable:
        log.warning("%s", u.reason)
    for r in runs:
        if r.summary.get("suite") not in (None, suite_name):
            raise ReportInputError(f"summary {r.summary_path} belongs to suite {r.summary.get('suite')!r}, "
                                   f"not {suite_name!r}")
    _check_spec(runs, spec)
    plans = load_plans(list(plan_paths))
    attempts, index_problems = load_attempts(Path(attempts_index) if attempts_index else None, evidence_root, runs)
    for p in index_problems:
        log.warning("%s", p)

    workloads = _order(list((suite_settings or {}).get("workloads") or []),
                       sorted({r.key[0] for r in runs} | set(plans)))
    backends = _order(list((suite_settings or {}).get("backends") or []),
                      list(dict.fromkeys(r.key[1] for r in runs)))
    rank_w = {w: i for i, w in enumerate(workloads)}
    rank_b = {b: i for i, b in enumerate(backends)}
    runs.sort(key=lambda r: (rank_w[r.key[0]], rank_b[r.key[1]], r.key[2]))

    headline = tables.headline_table(runs, workloads, backends)
    tabs = {
        "headline": headline,
        "ratios": tables.ratios_table(headline, workloads, backends),
        "measured": tables.measured_table(runs),
        "runs": tables.runs_table(runs),
        "attempts": tables.attempts_table(attempts),
        "offered": tables.offered_table(plans, workloads),
        "updates": tables.updates_table(runs),
        "trial_stats": tables.trial_stats_table(runs, workloads, backends, stats_settings),
        "comparisons": tables.comparisons_table(runs, workloads, backends, stats_settings),
        "activity": tables.activity_table(runs),
        "unreadable": pd.DataFrame([vars(u) for u in unreadable], columns=["summary_path", "reason"]),
    }
    return ReportData(suite_name, spec, suite_settings, stats_settings, evidence_root, runs, plans, attempts,
                      workloads, backends, tabs, unreadable)


def render_report(summary_paths, plan_paths, evidence_root, out_html, tables_dir, figures_dir,
                  suite_name: str, spec=None, attempts_index=None, stats_settings=None,
                  run_infra_paths=None, probe_paths=None, eval_summary_paths=(),
                  offered_figure_paths: list | None = None) -> None:
    """Build the comparison report from summaries, offered plans and the evidence root.

    The inputs are read by `collect_report` (which says what each one does).
    `run_infra_paths` / `probe_paths` (per-run infrastructure summaries, probe records)
    add the Infrastructure section (report/infra.py); without both it is left out.
    `offered_figure_paths` are the plan rule's offered-length figures, one per plan in
    the same order; without them the figures are drawn from the plans here.
    """
    t0 = time.monotonic()
    data = collect_report(summary_paths, plan_paths, evidence_root, suite_name, spec, attempts_index, stats_settings)
    runs, plans, workloads, backends, tabs = data.runs, data.plans, data.workloads, data.backends, data.tabs
    tables.write_tables(tabs, Path(tables_dir))
    timeline, offered_png = _write_figures(runs, plans, workloads, backends, Path(figures_dir),
                                           _offered_figures(plans, offered_figure_paths))

    context = _context(data, timeline, offered_png, attempts_index)
    context["infra"] = None
    if run_infra_paths is not None or probe_paths is not None:
        from .infra import build_section

        context["infra"] = build_section(run_infra_paths or [], probe_paths or [], Path(tables_dir), Path(figures_dir))
    context["eval"] = eval_section(eval_summary_paths, Path(tables_dir), tables.write_tables)
    html = _env().get_template("comparison.html.j2").render(**context)
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    write_output(out_html, html.encode("utf-8"))
    log.info("rendered %s from %d run(s), %d plan(s), %d evidence dir(s) in %.2f s",
             out_html, len(runs), len(plans), len(data.attempts), time.monotonic() - t0)
