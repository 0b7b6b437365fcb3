"""The comparison report: values, failed attempts, self-containment and determinism.

Evidence here is TEST FIXTURE evidence written by tests/evidence_fixtures.py through the
real EvidenceWriter; summaries come from the real contract code and plans from the real
workload generator, so only the numbers are synthetic.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from evidence_fixtures import build_evidence, default_calls  # noqa: E402

from rl_pipeline_bench import jobs  # noqa: E402
from rl_pipeline_bench.evidence.attempts import seed_index  # noqa: E402
from rl_pipeline_bench.contract.summary import summarize_to_file  # noqa: E402
from rl_pipeline_bench.evidence.digest import seal  # noqa: E402
from rl_pipeline_bench.report import ReportInputError, render_report  # noqa: E402
from rl_pipeline_bench.report.figures import write_offered_figure  # noqa: E402
from rl_pipeline_bench.settings.spec import build_spec, check_spec  # noqa: E402
from rl_pipeline_bench.plan.workloads import read_plan, spec_plan, write_plan  # noqa: E402

WORKLOADS = ["multi_turn", "long_generation"]
BACKENDS = ["art", "skyrl"]
UPDATES = list(range(1, 21))


def _spec(cfg: dict, suite: str, backends: list[str], contract: dict | None = None):
    """The run spec of a fixture suite (built from a copy of config.yaml, `cfg`, plus that suite)."""
    cfg["suites"][suite] = {
        **cfg["suites"]["smoke"], "description": f"Fixture suite {suite} for the report tests.",
        "backends": backends, "workloads": WORKLOADS, "scale": 0.02,
        "contract": contract or {"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5},
    }
    return check_spec(build_spec(cfg, suite))


def _manifest(spec, backend, workload):
    m = {"backend": backend, "workload": workload, "suite": spec.suite_name, "trial": 1,
         "spec": {"id": spec.id, "hash": spec.hash}}
    if backend == "art":  # the contract requires a healthy ART autotuner (fixture values)
        m["art_autotuner"] = {"healthy": True, "problems": []}
    return m


def _summarize(ws: Path, spec, backend: str, workload: str, evidence: Path) -> Path:
    out = ws / "results" / "runs" / spec.id / backend / workload / "trial1" / "summary.json"
    summarize_to_file(evidence, out)
    return out


def _plans(ws: Path, spec) -> list[Path]:
    paths = []
    for w in WORKLOADS:
        _ws, plan, meta = spec_plan(spec, w)
        paths.append(write_plan(plan, ws / "results" / "workloads" / spec.id / f"{w}.parquet", meta))
    return paths


def _render(ws: Path, inputs: dict, out: str) -> Path:
    """Render like the workflow does; the fixture evidence is indexed as `bench attempts seed` would."""
    reports = ws / out
    index = ws / "results" / "attempts.jsonl"
    seed_index(ws / "results" / "evidence", index)
    render_report(inputs["summaries"], inputs["plans"], ws / "results" / "evidence", reports / "comparison.html",
                  reports / "tables", reports / "figures", inputs["suite"], inputs["spec"], attempts_index=index)
    return reports


def trial_summaries(ws: Path, spec, trials, spread: float, calls_for=None) -> list[Path]:
    """Summaries of art (3 s/update) and skyrl (2 s/update) on WORKLOADS, trial t's updates
    (1 + spread * t) times slower; `calls_for(backend, workload, trial, completed)` may give a
    run its own calls (None: the default ones)."""
    ev, summaries = ws / "results" / "evidence", []
    for w in WORKLOADS:
        for b, step in (("art", 3.0), ("skyrl", 2.0)):
            for t in trials:
                completed = [step * u * (1 + spread * t) for u in UPDATES]
                calls = calls_for(b, w, t, completed) if calls_for else None
                path = build_evidence(ev, completed_at=completed, manifest={**_manifest(spec, b, w), "trial": t},
                                      run_id=f"20260101T00000{t}Z-{spec.suite_name}-{b}-{w}-trial{t}",
                                      **({"calls": calls} if calls is not None else {}))
                out = ws / "results" / "runs" / spec.id / b / w / f"trial{t}" / "summary.json"
                summarize_to_file(path, out)
                summaries.append(out)
    return summaries


@pytest.fixture(scope="module")
def two_backends(tmp_path_factory, fresh_config):
    """art is 3 s/update, skyrl 2 s/update; skyrl/long_generation breaks forced lengths and
    has an earlier failed attempt; plus a corrupt and an empty evidence directory."""
    ws = tmp_path_factory.mktemp("report2")
    suite = "fixture2"
    spec = _spec(fresh_config(), suite, BACKENDS)
    ev = ws / "results" / "evidence"
    summaries = []
    n = 0
    for w in WORKLOADS:
        for b, step in (("art", 3.0), ("skyrl", 2.0)):
            completed = [step * u for u in UPDATES]
            kw = {}
            if (b, w) == ("skyrl", "long_generation"):
                n += 1
                build_evidence(ev, completed_at=completed, status="failed", error="RuntimeError: boom-xyz",
                               manifest=_manifest(spec, b, w), run_id=f"20260101T00000{n}Z-{suite}-{b}-{w}-failed")
                calls = default_calls(UPDATES, completed, [u % 4 + 1 for u in UPDATES], 4)
                calls[5]["completion_tokens"] += 3
                kw["calls"] = calls
            n += 1
            path = build_evidence(ev, completed_at=completed, manifest=_manifest(spec, b, w),
                                  run_id=f"20260101T00000{n}Z-{suite}-{b}-{w}-trial1", **kw)
            summaries.append(_summarize(ws, spec, b, w, path))
    corrupt = ev / "zz-corrupt"
    corrupt.mkdir()
    (corrupt / "manifest.json").write_text("{not json")
    (corrupt / "updates.parquet").write_bytes(b"garbage")
    (ev / "zz-empty").mkdir()
    inputs = {"summaries": summaries, "plans": _plans(ws, spec), "suite": suite, "spec": spec}
    reports = _render(ws, inputs, "reports")
    return SimpleNamespace(ws=ws, inputs=inputs, reports=reports,
                           html=(reports / "comparison.html").read_text(encoding="utf-8"))


def _section(html: str, anchor: str) -> str:
    start = html.index(f'<section id="{anchor}">')
    return html[start:html.index("</section>", start)]


def test_headline_values_and_ratios_in_html(two_backends):
    head = _section(two_backends.html, "headline")
    # art: updates 16-20 accept 1+2+3+4+1 = 11 trajectories and 9000 tokens in 60-45 = 15 s.
    assert "0.733" in head and "600.0" in head
    # skyrl: the same work in 40-30 = 10 s; trainer union 2 s/update for both backends.
    assert "1.10" in head and "900.0" in head
    ratios = _section(two_backends.html, "ratios")
    assert "skyrl&nbsp;/&nbsp;art" in ratios
    assert ratios.count("1.50×") >= 2 and "1.00×" in ratios


def test_invalid_run_and_failed_attempts_are_listed(two_backends):
    validation = _section(two_backends.html, "validation")
    assert "completion_length_mismatch" in validation
    attempts = _section(two_backends.html, "attempts")
    assert "zz-corrupt" in attempts and "unreadable manifest" in attempts
    assert "zz-empty" in attempts
    assert "boom-xyz" in attempts
    assert "fixture2-skyrl-long_generation-trial1" in attempts  # completed but invalid
    assert "fixture2-art-multi_turn-trial1" not in attempts  # completed and valid


def test_contract_and_description_are_stated(two_backends):
    contract = _section(two_backends.html, "contract")
    assert "All runs used the default contract" in contract
    assert "Fixture suite fixture2 for the report tests." in two_backends.html


def test_html_is_self_contained(two_backends):
    html = two_backends.html
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html and "<script" not in html
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == 1 + len(WORKLOADS)  # timelines + one offered figure per workload
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "url(" not in html and "@import" not in html


def test_tables(two_backends):
    tables = two_backends.reports / "tables"
    assert {p.name for p in tables.iterdir()} >= {"headline.csv", "measured.csv", "runs.csv", "attempts.csv"}
    head = pd.read_csv(tables / "headline.csv")
    assert list(zip(head.workload, head.backend)) == [(w, b) for w in WORKLOADS for b in BACKENDS]
    assert head.set_index(["workload", "backend"]).loc[("long_generation", "skyrl"), "valid"] == False  # noqa: E712
    assert head.headline_trajectories_per_s.round(6).tolist() == [0.733333, 1.1, 0.733333, 1.1]
    ratios = pd.read_csv(tables / "ratios.csv").set_index(["workload", "backend"])
    assert ratios.loc[("multi_turn", "skyrl"), "headline_trajectories_per_s"] == pytest.approx(1.5)
    assert ratios.loc[("multi_turn", "skyrl"), "trainer_assistant_tokens_per_s"] == pytest.approx(1.0)
    runs = pd.read_csv(tables / "runs.csv", keep_default_na=False)
    assert len(runs) == 4
    bad = runs[runs.backend.eq("skyrl") & runs.workload.eq("long_generation")].iloc[0]
    assert "completion_length_mismatch" in bad.reasons and bad.model.startswith("fixture/model @ 000")
    attempts = pd.read_csv(tables / "attempts.csv", keep_default_na=False)
    assert len(attempts) == 7  # four reported runs, the failed attempt, corrupt, empty
    flagged = set(attempts.loc[attempts.failed_or_invalid, "run_id"])
    assert {"zz-corrupt", "zz-empty"} <= flagged and len(flagged) == 4
    measured = pd.read_csv(tables / "measured.csv")
    row = measured[(measured.backend == "art") & (measured.workload == "multi_turn") & (measured.window == "measured")]
    assert row.window_s.item() == pytest.approx(45.0) and row.first_update.item() == 6


def test_same_evidence_gives_identical_outputs(two_backends):
    first = two_backends.reports
    second = _render(two_backends.ws, two_backends.inputs, "reports-again")

    def snapshot(d: Path) -> dict[str, bytes]:
        return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}

    before = snapshot(first)
    assert before == snapshot(second)
    shutil.rmtree(first)
    _render(two_backends.ws, two_backends.inputs, "reports")
    assert snapshot(first) == before


def test_single_backend_non_default_contract(config, tmp_path):
    suite = "fixture1"
    contract = {"warmup_updates": 2, "measured_updates": 3, "headline_updates": 2}
    spec = _spec(config, suite, ["reference"], contract)
    ev = tmp_path / "results" / "evidence"
    summaries = []
    for i, w in enumerate(WORKLOADS):
        path = build_evidence(ev, contract=contract, manifest=_manifest(spec, "reference", w),
                              run_id=f"2026010{i}T000000Z-{suite}-reference-{w}-trial1")
        summaries.append(_summarize(tmp_path, spec, "reference", w, path))
    shutil.rmtree(path)  # the report must still render when a run's evidence has gone
    inputs = {"summaries": summaries, "plans": _plans(tmp_path, spec), "suite": suite, "spec": spec}
    reports = _render(tmp_path, inputs, "reports")
    html = (reports / "comparison.html").read_text(encoding="utf-8")
    assert "did NOT use the default contract" in _section(html, "contract")
    assert "2 warmup + 3 measured updates" in html
    assert "Only one backend (reference)" in _section(html, "ratios")
    assert "not found under" in _section(html, "validation")
    # its timeline is the summary's own: still drawn and tabulated without the evidence
    updates = pd.read_csv(reports / "tables" / "updates.csv")
    assert sorted(updates.groupby("workload").size().to_dict().items()) == [("long_generation", 5), ("multi_turn", 5)]
    assert pd.read_csv(reports / "tables" / "ratios.csv").empty
    # header + both reported runs: the attempt whose evidence went is still known from its summary
    assert (reports / "tables" / "attempts.csv").read_text().count("\n") == 3


def test_bad_summary_names_the_file(tmp_path):
    bad = tmp_path / "summary.json"
    bad.write_text(json.dumps({"schema": "something/else"}))
    with pytest.raises(ReportInputError, match=re.escape(str(bad))):
        render_report([bad], [], tmp_path / "evidence", tmp_path / "r.html", tmp_path / "t", tmp_path / "f", "smoke")


def test_workflow_job_entry_point(two_backends, tmp_path):
    i = two_backends.inputs
    out = tmp_path / "reports"
    smk = SimpleNamespace(
        input=SimpleNamespace(summaries=[str(p) for p in i["summaries"]], plans=[str(p) for p in i["plans"]]),
        params=SimpleNamespace(evidence_root=str(two_backends.ws / "results" / "evidence"), suite=i["suite"]),
        output=SimpleNamespace(html=str(out / "comparison.html"), tables=str(out / "tables"),
                               figures=str(out / "figures")),
        log=[str(tmp_path / "report.log")])
    # The plan rule draws each offered-length figure once; the report embeds those files as they are.
    drawn = []
    for plan in i["plans"]:
        drawn.append(tmp_path / "plans" / f"{Path(plan).stem}.offered.png")
        write_offered_figure(read_plan(plan), Path(plan).stem, drawn[-1])
    jobs.render_report(smk.input.summaries, smk.input.plans, smk.params.evidence_root, smk.output.html,
                       smk.output.tables, smk.output.figures, smk.params.suite, i["spec"], log_path=smk.log[0],
                       attempts_index=two_backends.ws / "results" / "attempts.jsonl", offered_figures=drawn)
    assert (out / "comparison.html").read_bytes() == (two_backends.reports / "comparison.html").read_bytes()
    assert "rendered" in (tmp_path / "report.log").read_text()
    for plan, png in zip(i["plans"], drawn):
        assert (out / "figures" / f"offered_{Path(plan).stem}.png").read_bytes() == png.read_bytes()
    with pytest.raises(ReportInputError, match="1 offered-length figure.s. for 2 plan"):
        jobs.render_report(smk.input.summaries, smk.input.plans, smk.params.evidence_root, tmp_path / "x.html",
                           tmp_path / "xt", tmp_path / "xf", smk.params.suite, i["spec"], offered_figures=drawn[:1])


def _one_reference_run(config: dict, tmp_path: Path, suite: str, **manifest) -> tuple:
    """(spec, evidence dir) of one fixture run of the reference backend on multi_turn."""
    spec = _spec(config, suite, ["reference"])
    path = build_evidence(tmp_path / "results" / "evidence", manifest={**_manifest(spec, "reference", "multi_turn"),
                                                                       **manifest},
                          run_id=f"20260101T000000Z-{suite}-reference-multi_turn-trial1")
    return spec, path


def _one_run_inputs(tmp_path: Path, spec, path: Path) -> dict:
    summaries = [_summarize(tmp_path, spec, "reference", "multi_turn", path)]
    return {"summaries": summaries, "plans": _plans(tmp_path, spec)[:1], "suite": spec.suite_name, "spec": spec}


@pytest.mark.parametrize("bad", [{"trial": "one"}, {"backend": ["x"]}])
def test_reported_run_with_mistyped_identity(config, tmp_path, bad):
    """A manifest naming its run with values of the wrong type makes an invalid summary, never a report crash."""
    spec, path = _one_reference_run(config, tmp_path, "fixture6", **bad)
    inputs = _one_run_inputs(tmp_path, spec, path)
    summaries = inputs["summaries"]
    summary = json.loads(summaries[0].read_text())
    assert not summary["valid"] and any(r.startswith("manifest_identity") for r in summary["reasons"])
    reports = _render(tmp_path, inputs, "reports")
    html = (reports / "comparison.html").read_text(encoding="utf-8")
    assert "manifest_identity" in _section(html, "validation") and "taken from its path" in html
    runs = pd.read_csv(reports / "tables" / "runs.csv")
    assert runs[["workload", "backend", "trial", "valid"]].values.tolist() == [["multi_turn", "reference", 1, False]]
    # A summary written by older code that echoed the bad value is read the same way.
    summaries[0].write_text(json.dumps({**summary, **bad}))
    _render(tmp_path, inputs, "reports-old")


def test_reported_run_with_corrupt_manifest(config, tmp_path):
    """A declared run whose manifest is garbage is still reported, as invalid, under its run path."""
    spec, path = _one_reference_run(config, tmp_path, "fixture3")
    (path / "manifest.json").write_text("[1, 2")
    inputs = _one_run_inputs(tmp_path, spec, path)
    reports = _render(tmp_path, inputs, "reports")
    html = (reports / "comparison.html").read_text(encoding="utf-8")
    assert "manifest_corrupt" in _section(html, "validation")
    assert "taken from its path" in _section(html, "validation")
    head = pd.read_csv(reports / "tables" / "headline.csv")
    assert head[["workload", "backend", "valid"]].values.tolist() == [["multi_turn", "reference", False]]


def test_mixed_schema_versions(config, tmp_path):
    """Each run is read by its version's reader or listed as unreadable with the reason, never a crash:
    a v2 summary (no reader here) is listed; v1 evidence and v2 evidence (a summary saying so) are runs."""
    suite = "fixture4"
    spec = _spec(config, suite, ["reference"])
    ev = tmp_path / "results" / "evidence"
    summaries = []
    for w in WORKLOADS:
        path = build_evidence(ev, manifest=_manifest(spec, "reference", w),
                              run_id=f"20260101T000000Z-{suite}-reference-{w}-trial1")
        if w == "long_generation":  # evidence written by a later version: the contract reads none of its tables
            m = json.loads((path / "manifest.json").read_text())
            (path / "manifest.json").write_text(json.dumps({**m, "schema": "rl-bench/evidence/v2"}))
        summaries.append(_summarize(tmp_path, spec, "reference", w, path))
    older = json.loads(summaries[0].read_text())  # a v1 summary from before summaries carried the timeline
    expected_timeline = older.pop("timeline")
    summaries[0].write_text(json.dumps(seal(older)))  # sealed as written (an unsealed one is summary_unsealed)
    future = tmp_path / "results" / "runs" / spec.id / "reference" / "multi_turn" / "trial2" / "summary.json"
    future.parent.mkdir(parents=True)
    future.write_text(json.dumps({"schema": "rl-bench/summary/v2", "run_id": "x", "rates": {}}))
    inputs = {"summaries": [*summaries, future], "plans": _plans(tmp_path, spec), "suite": suite, "spec": spec}
    reports = _render(tmp_path, inputs, "reports")
    html = (reports / "comparison.html").read_text(encoding="utf-8")
    validation = _section(html, "validation")
    assert "Summaries this version cannot read" in validation and str(future) in validation
    assert "summary_schema" in validation and "rl-bench/summary/v2" in validation
    unreadable = pd.read_csv(reports / "tables" / "unreadable.csv")
    assert unreadable["summary_path"].tolist() == [str(future)]
    assert unreadable["reason"].str.startswith("summary_schema:").all()
    head = pd.read_csv(reports / "tables" / "headline.csv").set_index("workload")
    assert bool(head.loc["multi_turn", "valid"]) and not bool(head.loc["long_generation", "valid"])
    runs = pd.read_csv(reports / "tables" / "runs.csv").set_index("workload")
    assert "manifest_schema" in runs.loc["long_generation", "reasons"]
    assert "rl-bench/evidence/v2" in validation  # the evidence reader's reason, shown for the run
    drawn = pd.read_csv(reports / "tables" / "updates.csv")
    drawn = drawn[drawn.workload == "multi_turn"]  # read from its evidence: the summary has no timeline
    assert drawn["update"].tolist() == expected_timeline["update"]
    assert drawn["completed_at"].round(6).tolist() == [round(t, 6) for t in expected_timeline["completed_at"]]
    from rl_pipeline_bench.report.paper import render_paper_sources

    render_paper_sources(inputs["summaries"], inputs["plans"], ev, tmp_path / "paper", suite, spec,
                         attempts_index=tmp_path / "results" / "attempts.jsonl")
    tex = (tmp_path / "paper" / "tables" / "unreadable.tex").read_text()
    assert "summary\\_schema" in tex and "\\input{tables/unreadable.tex}" in (tmp_path / "paper" / "paper.tex").read_text()


def test_report_judges_a_run_once_when_its_evidence_changed(config, tmp_path):
    """Evidence damaged after its summary was written: the summary is out of date (summary_stale), and the
    headline and attempts tables give that one verdict (before digests, both said valid)."""
    spec, path = _one_reference_run(config, tmp_path, "fixture5")
    inputs = _one_run_inputs(tmp_path, spec, path)
    (path / "calls.parquet").write_bytes(b"changed after the summary")
    index = tmp_path / "results" / "attempts.jsonl"
    from rl_pipeline_bench.evidence.attempts import append_event

    append_event(index, "summarized", path.name, valid=False, reasons=["calls_corrupt: a later re-scoring"])
    reports = _render(tmp_path, inputs, "reports")
    head = pd.read_csv(reports / "tables" / "headline.csv")
    attempts = pd.read_csv(reports / "tables" / "attempts.csv").set_index("run_id")
    assert head["valid"].tolist() == [False]
    assert bool(attempts.at[path.name, "valid"]) is False and bool(attempts.at[path.name, "failed_or_invalid"])
    assert attempts.at[path.name, "reasons"].startswith("summary_stale: evidence file(s) calls.parquet changed")


def _times_1000_tokens(evidence: Path, summary: Path) -> None:
    updates = pd.read_parquet(evidence / "updates.parquet")
    updates["assistant_tokens"] *= 1000
    updates.to_parquet(evidence / "updates.parquet")


def _edit_summary(change):
    def edit(evidence: Path, summary: Path) -> None:
        s = json.loads(summary.read_text())
        change(s)
        summary.write_text(json.dumps(s))
    return edit


@pytest.mark.parametrize("edit, code", [
    (_times_1000_tokens, "summary_stale"),
    (_edit_summary(lambda s: s.update(valid=True, reasons=["updates_missing: x"])), "summary_malformed"),
    (_edit_summary(lambda s: s["e2e"]["headline"].update(
        trajectories_per_s=s["e2e"]["headline"]["trajectories_per_s"] * 1000)), "summary_edited"),
    (_edit_summary(lambda s: s.update(e2e="nope")), "summary_malformed"),
    (_edit_summary(lambda s: s.pop("summary_sha256")), "summary_unsealed"),
], ids=["evidence-tokens-x1000", "valid-with-reasons", "rates-x1000", "e2e-nope", "seal-removed"])
def test_an_edited_summary_or_evidence_is_never_shown_as_valid(config, tmp_path, edit, code):
    """The report re-checks each summary's own digest and shape and its evidence's digest (docs/validation.md)."""
    suite = "fixture_digest"
    spec = _spec(config, suite, ["reference"])
    ev = tmp_path / "results" / "evidence"
    summaries, evidence = [], {}
    for w in WORKLOADS:
        evidence[w] = build_evidence(ev, manifest=_manifest(spec, "reference", w),
                                     run_id=f"20260101T000000Z-{suite}-reference-{w}-trial1")
        summaries.append(_summarize(tmp_path, spec, "reference", w, evidence[w]))
    assert all(json.loads(p.read_text())["valid"] for p in summaries)
    edit(evidence["multi_turn"], summaries[0])
    reports = _render(tmp_path, {"summaries": summaries, "plans": _plans(tmp_path, spec), "suite": suite,
                                 "spec": spec}, "reports")
    runs = pd.read_csv(reports / "tables" / "runs.csv").set_index("workload")
    assert not bool(runs.loc["multi_turn", "valid"]) and runs.loc["multi_turn", "reasons"].startswith(code + ":")
    assert bool(runs.loc["long_generation", "valid"]), runs.loc["long_generation", "reasons"]
    head = pd.read_csv(reports / "tables" / "headline.csv").set_index("workload")
    assert not bool(head.loc["multi_turn", "valid"])
