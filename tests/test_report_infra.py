"""The report's Infrastructure section: tables as DataFrames, expectations, figures, HTML.

The storage record comes from a real probe run here. The run summary is built from
TEST FIXTURE evidence (tests/evidence_fixtures.py) with a hand-made telemetry file;
the NCCL all-reduce records are TEST FIXTURE records with invented numbers, written to
exercise the expectation rules (no GPU here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evidence_fixtures import build_evidence
from system_tools import require_tool
from rl_pipeline_bench.contract.summary import summarize_to_file
from rl_pipeline_bench.records.atomicfile import atomic_write_json
from rl_pipeline_bench.probes.allreduce import ALLREDUCE_SCHEMA, sweep_rows
from rl_pipeline_bench.probes.run_infra import summarize_run_infra
from rl_pipeline_bench.probes.storage import run_storage_probe
from rl_pipeline_bench.probes.telemetry import TELEMETRY, TELEMETRY_SCHEMA
from rl_pipeline_bench.report import ReportInputError, render_report
from rl_pipeline_bench.report.infra import infra_tables, load_inputs


def _allreduce_fixture(label: str, backend: str, world: int, names: list[str], seconds: float) -> dict:
    sizes = [1 << 20, 1 << 30]
    rows = sweep_rows(sizes, [seconds / 1024, seconds], world)
    return {"schema": ALLREDUCE_SCHEMA, "label": label, "backend": backend, "world_size": world,
            "device": "cuda" if backend == "nccl" else "cpu", "device_names": names, "nccl_version": "2.0.0",
            "torch_version": "fixture", "env": {"NCCL_NVLS_ENABLE": "0"}, "rows": rows, "largest": rows[-1],
            "min_bytes": sizes[0], "max_bytes": sizes[-1], "warmup_iters": 5, "iters": 20,
            "busbw_note": None if world >= 2 else "world size 1: ... needs at least 2 GPUs"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("infra")
    telemetry = {"status": "recorded", "devices": [{"index": 0, "uuid": "GPU-0"}], "sampler_busy_fraction": 0.001}
    ev = build_evidence(ws / "results" / "evidence", manifest={"suite": "smoke", "telemetry": telemetry,
                                                               "gpus": [{"index": 0, "uuid": "GPU-0", "name": "NVIDIA H200"}]})
    rows = [{"t": t, "gpu_index": 0, "gpu_uuid": "GPU-0", "source": "poll", "gpu_util_pct": u, "mem_util_pct": 1.0,
             "memory_used_mib": m, "memory_total_mib": 1000.0, "power_w": 1.0, "sm_clock_mhz": 1.0}
            for t, u, m in ((45.1, 5.0, 100.0), (46.5, 95.0, 700.0), (47.8, 1.0, 100.0))]
    pq.write_table(pa.Table.from_pylist(rows, schema=TELEMETRY_SCHEMA), ev / TELEMETRY)
    summary = ws / "results" / "runs" / "smoke" / "reference" / "multi_turn" / "trial1" / "summary.json"
    summarize_to_file(ev, summary)
    infra = summary.with_name("infra.json")
    atomic_write_json(infra, summarize_run_infra(ev, None))
    probes = ws / "results" / "probes"
    probes.mkdir(parents=True)
    storage = run_storage_probe(ws / "scratch", 4 << 20, label="smoke", log=lambda m: None)
    atomic_write_json(probes / "storage.json", storage)
    records = {"cpu": _allreduce_fixture("cpu", "gloo", 2, [], 0.5),
               "h200x1": _allreduce_fixture("h200x1", "nccl", 1, ["NVIDIA H200"], 0.001),
               "h200x8": _allreduce_fixture("h200x8", "nccl", 8, ["NVIDIA H200"] * 8, 0.005)}
    for name, rec in records.items():
        atomic_write_json(probes / f"allreduce_{name}.json", rec)
    return {"ws": ws, "summary": summary, "infra": [infra], "probes": sorted(probes.glob("*.json"))}


def test_tables_are_dataframes_with_the_findings(workspace):
    tabs = infra_tables(load_inputs(workspace["infra"], workspace["probes"]))
    assert all(isinstance(t, pd.DataFrame) for t in tabs.values())
    tel = tabs["infra_telemetry"].iloc[0]
    assert tel["telemetry_status"] == "recorded" and tel["update_gpu_util_mean"] == 95.0
    assert tel["update_gpu_util_met"] in (True,) and tel["memory_used_peak_pct"] == 70.0
    assert tel["memory_used_met"] in (False,)  # 70 % is not > 80 % (None would not compare equal)
    assert tel["sampler_busy_pct"] == pytest.approx(0.1)
    util = tabs["infra_utilisation"]
    assert set(util["phase"]) == {"update", "rollout", "other", "all"}
    st = tabs["infra_storage"]
    assert list(st["direction"]) == ["write", "read"] and (st["mb_per_s"] > 0).all()
    assert set(st["target"]) == {"> 500 MB/s"}
    ar = tabs["infra_allreduce"]
    assert set(ar["label"]) == {"cpu", "h200x1", "h200x8"}
    assert set(tabs["infra_targets"]["target"]) >= {"gpu_util_update", "memory_used", "storage_write", "checkpoint_save"}


def test_expectations_say_what_applies(workspace):
    exp = infra_tables(load_inputs([], workspace["probes"]))["infra_allreduce_expectations"]
    verdicts = {(r.label, r.expectation): r.verdict for r in exp.itertuples()}
    assert verdicts[("cpu", "p5-inter-node")].startswith("not applicable: a CPU")
    assert "world size 1" in verdicts[("h200x1", "h200-nvlink-intra-node")]
    # 2^30 B in 5 ms = 214.7 GB/s algbw; busbw * 1.75 = 375.8 GB/s, 83.5 % of the 450 GB/s link peak
    assert verdicts[("h200x8", "h200-nvlink-intra-node")] == "83.5 % of the link peak"
    assert verdicts[("h200x8", "p5-inter-node")].startswith("not applicable: probe GPUs")
    assert verdicts[("h200x8", "p4de-inter-node")].startswith("not applicable")


def test_report_renders_the_section_with_figures(workspace, tmp_path):
    out = tmp_path / "reports"
    render_report([workspace["summary"]], [], workspace["ws"] / "results" / "evidence", out / "comparison.html",
                  out / "tables", out / "figures", "smoke", run_infra_paths=workspace["infra"],
                  probe_paths=workspace["probes"])
    html = (out / "comparison.html").read_text()
    assert 'id="infrastructure"' in html and "GPU utilisation per phase" in html
    assert "83.5 % of the link peak" in html and "needs at least 2 GPUs" in html
    for name in ("infra_allreduce", "infra_storage"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000
    assert not (out / "figures" / "infra_checkpoint.png").exists()  # no checkpoint probe given
    for name in ("infra_telemetry", "infra_utilisation", "infra_allreduce_expectations", "infra_storage", "infra_targets"):
        assert (out / "tables" / f"{name}.csv").is_file()


def test_report_without_infra_inputs_has_no_section(workspace, tmp_path):
    out = tmp_path / "r"
    render_report([workspace["summary"]], [], workspace["ws"] / "results" / "evidence", out / "c.html",
                  out / "t", out / "f", "smoke")
    assert 'id="infrastructure"' not in (out / "c.html").read_text()


def test_wrong_input_file_is_named(workspace, tmp_path):
    with pytest.raises(ReportInputError, match="summary.json has schema"):
        load_inputs([], [workspace["summary"]])
    missing = tmp_path / "nope.json"
    with pytest.raises(ReportInputError, match="does not exist"):
        load_inputs([missing], [])
    assert json.loads(Path(workspace["infra"][0]).read_text())["schema"] == "rl-bench/run-infra/v1"


def test_run_infra_summary_refuses_a_run_of_another_spec(config, workspace, tmp_path):
    """`bench probe summarize-run --spec` (in the summarize_run rule): run.json and manifest must name the spec's hash."""
    from rl_pipeline_bench.jobs import summarize_run_infra as summarize_run_json
    from rl_pipeline_bench.settings.spec import SpecError, build_spec, write_spec

    doc = build_spec(config, "smoke")
    spec = write_spec(doc, tmp_path / f"{doc['id']}.json")
    ev = json.loads(Path(workspace["infra"][0]).read_text())["evidence_dir"]
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"evidence_dir": ev, "spec_hash": "feedfeedfeed"}))
    with pytest.raises(SpecError, match=f"feedfeedfeed.*{spec.hash}"):
        summarize_run_json(run_json, None, tmp_path / "infra.json", spec_path=spec.path)
    run_json.write_text(json.dumps({"evidence_dir": ev, "spec_hash": spec.hash}))  # the manifest names no spec
    with pytest.raises(SpecError, match="no spec hash"):
        summarize_run_json(run_json, None, tmp_path / "infra.json", spec_path=spec.path)
    assert not (tmp_path / "infra.json").exists()
    summarize_run_json(run_json, None, tmp_path / "infra.json")  # without a spec (by hand): summarised
    assert json.loads((tmp_path / "infra.json").read_text())["telemetry"]["status"] == "recorded"


def _paper_sources(workspace, out: Path) -> Path:
    from rl_pipeline_bench.report.paper import render_paper_sources

    render_paper_sources([workspace["summary"]], [], workspace["ws"] / "results" / "evidence", out,
                         "smoke", run_infra_paths=workspace["infra"], probe_paths=workspace["probes"])
    return out


def test_paper_has_the_probe_tables(workspace, tmp_path):
    """The paper's Infrastructure section: one LaTeX table per non-empty infra table."""
    src = _paper_sources(workspace, tmp_path / "src")
    tex = (src / "paper.tex").read_text()
    assert "\\section{Infrastructure}" in tex
    for name in ("allreduce", "allreduce_expectations", "storage", "telemetry", "targets"):
        assert f"\\input{{tables/infrastructure_{name}.tex}}" in tex, name
    assert "nccl" in (src / "tables" / "infrastructure_allreduce.tex").read_text()
    assert not (src / "tables" / "infrastructure_checkpoint.tex").exists()  # no checkpoint probe


@pytest.mark.tex
def test_paper_with_the_probe_tables_compiles(workspace, tmp_path):
    from rl_pipeline_bench.report.paper import compile_paper

    require_tool("latexmk", "setup_tex.sh")
    src = _paper_sources(workspace, tmp_path / "src")
    assert compile_paper(src, tmp_path / "paper").read_bytes().startswith(b"%PDF-")
