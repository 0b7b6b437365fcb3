"""The paper report: LaTeX tables and PDF figures from retained evidence, a paper.pdf that
compiles, byte-identical rebuilds, and a clear error when TeX is missing.

The fixture evidence is TEST FIXTURE evidence (tests/evidence_fixtures.py, through the real
EvidenceWriter, summarised by the real contract code); the Snakemake test uses the session's
real smoke pipeline run. Compiling needs TeX Live with latexmk (.ci/setup_tex.sh installs
it in CI): without it those tests FAIL, naming what to install.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from evidence_fixtures import build_evidence, default_calls  # noqa: E402
from test_report import BACKENDS, UPDATES, WORKLOADS, _manifest, _plans, _spec  # noqa: E402
from workflow_copy import scheduled_jobs, snakemake  # noqa: E402

from rl_pipeline_bench.attempts import seed_index  # noqa: E402
from rl_pipeline_bench.contract.summary import summarize_to_file  # noqa: E402
from rl_pipeline_bench.report.build import collect_report, fmt_num  # noqa: E402
from rl_pipeline_bench.report.paper import TEX_INSTALL_HINT, compile_paper, render_paper_sources  # noqa: E402
from rl_pipeline_bench.spec import write_spec  # noqa: E402

TRIALS = (1, 2, 3)


def _need_latexmk() -> None:
    if shutil.which("latexmk") is None:
        pytest.fail(f"latexmk is not installed; {TEX_INSTALL_HINT}")


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """Two backends x two workloads x three trials (art 3 s/update, skyrl 2 s/update, a little
    noise per trial); skyrl/long_generation trial 3 breaks a forced length."""
    ws = tmp_path_factory.mktemp("paper")
    suite = "fixture2"
    spec = _spec(suite, BACKENDS)
    ev = ws / "results" / "evidence"
    summaries = []
    for w in WORKLOADS:
        for b, step in (("art", 3.0), ("skyrl", 2.0)):
            for t in TRIALS:
                completed = [step * u * (1 + 0.01 * t) for u in UPDATES]
                kw = {}
                if (b, w, t) == ("skyrl", "long_generation", 3):
                    calls = default_calls(UPDATES, completed, [u % 4 + 1 for u in UPDATES], 4)
                    calls[5]["completion_tokens"] += 3
                    kw["calls"] = calls
                path = build_evidence(ev, completed_at=completed, manifest={**_manifest(spec, b, w), "trial": t},
                                      run_id=f"20260101T00000{t}Z-{suite}-{b}-{w}-trial{t}", **kw)
                out = ws / "results" / "runs" / spec.id / b / w / f"trial{t}" / "summary.json"
                summarize_to_file(path, out)
                summaries.append(out)
    index = ws / "results" / "attempts.jsonl"
    seed_index(ev, index)
    inputs = dict(summary_paths=summaries, plan_paths=_plans(ws, spec), evidence_root=ev, suite_name=suite,
                  spec=spec, attempts_index=index)
    src = ws / "paper_sources"
    written = render_paper_sources(out_dir=src, **inputs)
    return SimpleNamespace(ws=ws, inputs=inputs, src=src, written=written, spec=spec)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_sources_hold_every_table_and_vector_figure(paper):
    files = _tree(paper.src)
    assert sorted(files) == sorted(p.relative_to(paper.src).as_posix() for p in paper.written)
    for t in ("headline", "measured", "trainer", "comparisons", "validation"):
        assert f"tables/{t}.tex" in files and f"\\input{{tables/{t}.tex}}" in files["paper.tex"].decode()
    for f in ("figures/timelines.pdf", "figures/offered_multi_turn.pdf", "figures/offered_long_generation.pdf"):
        assert files[f].startswith(b"%PDF-") and b"CreationDate" not in files[f]
        assert f"{{{f}}}" in files["paper.tex"].decode()
    headline = files["tables/headline.tex"].decode()
    # The numbers are the HTML report's trial statistics (report/stats.py), as that report shows them.
    stats = collect_report(**paper.inputs).tabs["trial_stats"]
    row = stats[(stats.workload == "multi_turn") & (stats.backend == "art")
                & (stats.rate == "headline_trajectories_per_s")].iloc[0]
    assert row["ci_low"] < row["mean"] < row["ci_high"]
    assert (f"multi\\_turn & art & 3/3 & {fmt_num(row['mean'])} [{fmt_num(row['ci_low'])}, "
            f"{fmt_num(row['ci_high'])}]") in headline
    assert "long\\_generation & skyrl & 2/3" in headline  # the invalid trial is not averaged
    validation = files["tables/validation.tex"].decode()
    assert "completion\\_length\\_mismatch (1)" in validation
    assert "95\\% CI" in files["tables/trainer.tex"].decode()
    assert files["tables/headline.tex"].isascii() and files["paper.tex"].isascii()


def test_rebuild_is_byte_identical_and_compiles(paper, tmp_path):
    _need_latexmk()
    again = tmp_path / "again"
    render_paper_sources(out_dir=again, **paper.inputs)
    assert _tree(again) == _tree(paper.src)
    first = compile_paper(paper.src, tmp_path / "paper1")
    second = compile_paper(again, tmp_path / "paper2")
    assert first.read_bytes().startswith(b"%PDF-")
    assert first.read_bytes() == second.read_bytes()
    out = _tree(tmp_path / "paper1")
    assert sorted(out) == sorted([*_tree(paper.src), "paper.pdf"]), "latexmk's own files stay out of the paper dir"
    text = subprocess.run(["pdftotext", str(first), "-"], capture_output=True, text=True).stdout \
        if shutil.which("pdftotext") else ""
    if text:
        assert "Headline end-to-end throughput" in text and "Figure 1" in text


def test_sources_import_no_gpu_or_benchmark_code(paper, tmp_path):
    """`bench paper sources` in its own process: torch, NVML and the runner are never imported."""
    args = ["paper", "sources", "--spec", str(paper.ws / "spec.json"), "--summaries",
            *map(str, paper.inputs["summary_paths"]), "--plans", *map(str, paper.inputs["plan_paths"]),
            "--evidence-root", str(paper.inputs["evidence_root"]),
            "--attempts-index", str(paper.inputs["attempts_index"]), "--out", str(tmp_path / "src")]
    write_spec(paper.spec.doc, paper.ws / "spec.json")
    code = ("import sys; from rl_pipeline_bench.cli import main; rc = main(sys.argv[1:]); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pynvml', 'transformers') "
            "or m.startswith(('rl_pipeline_bench.runner', 'rl_pipeline_bench.backends', 'rl_pipeline_bench.leases'))); "
            "print('IMPORTED', bad); sys.exit(rc or bool(bad))")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "IMPORTED []" in proc.stdout
    assert _tree(tmp_path / "src") == _tree(paper.src)


def test_without_tex_sources_stay_and_the_error_says_what_to_install(paper, tmp_path):
    bench = Path(sys.executable).parent / "bench"
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))  # the venv only: no latexmk on PATH
    proc = subprocess.run([str(bench), "paper", "compile", "--sources", str(paper.src), "--out",
                           str(tmp_path / "paper")], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "latexmk is not installed" in proc.stderr
    assert "apt-get install --no-install-recommends latexmk texlive-latex-base texlive-latex-recommended" in proc.stderr
    assert f"written in {paper.src}/" in proc.stderr
    assert (paper.src / "paper.tex").is_file() and (paper.src / "tables/headline.tex").is_file()
    assert not (tmp_path / "paper" / "paper.pdf").exists()


def _digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_workflow_paper_target_from_retained_evidence(smoke_workdir):
    """`snakemake reports/paper` schedules only the paper rules, leaves evidence and the attempts
    index untouched, and rebuilds byte for byte after `rm -rf reports/paper*`."""
    _need_latexmk()
    evidence = _digest(smoke_workdir / "results" / "evidence")
    index = (smoke_workdir / "results" / "attempts.jsonl").read_bytes()
    dry = snakemake(smoke_workdir, "-n", "reports/paper")
    assert dry.returncode == 0
    table = scheduled_jobs(dry).strip().split("\n\n")[0].splitlines()[2:]  # the job-stats rows
    assert {line.split()[0] for line in table} == {"paper_sources", "render_paper", "total"}, table
    proc = snakemake(smoke_workdir, "reports/paper")
    assert proc.returncode == 0
    first = _tree(smoke_workdir / "reports" / "paper")
    assert first["paper.pdf"].startswith(b"%PDF-")
    assert {"tables/headline.tex", "tables/trainer.tex", "tables/validation.tex", "figures/timelines.pdf",
            "figures/offered_multi_turn.pdf"} <= set(first)
    shutil.rmtree(smoke_workdir / "reports" / "paper")
    shutil.rmtree(smoke_workdir / "reports" / "paper_sources")
    assert snakemake(smoke_workdir, "reports/paper").returncode == 0
    assert _tree(smoke_workdir / "reports" / "paper") == first
    assert _digest(smoke_workdir / "results" / "evidence") == evidence
    assert (smoke_workdir / "results" / "attempts.jsonl").read_bytes() == index
