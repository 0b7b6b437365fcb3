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
from evidence_fixtures import default_calls  # noqa: E402
from test_report import BACKENDS, UPDATES, _plans, _spec, trial_summaries  # noqa: E402
from workflow_copy import scheduled_jobs, snakemake  # noqa: E402

from rl_pipeline_bench.evidence.attempts import seed_index  # noqa: E402
from rl_pipeline_bench.report.build import collect_report, fmt_num  # noqa: E402
from rl_pipeline_bench.report.paper import TEX_INSTALL_HINT, compile_paper, render_paper_sources  # noqa: E402
from rl_pipeline_bench.settings.spec import write_spec  # noqa: E402

# Slow tier (tests/conftest.py): the smoke pipeline's evidence, compiled with latexmk.
pytestmark = [pytest.mark.e2e, pytest.mark.tex]

TRIALS = (1, 2, 3)


def _need_latexmk() -> None:
    if shutil.which("latexmk") is None:
        pytest.fail(f"latexmk is not installed; {TEX_INSTALL_HINT}")


@pytest.fixture(scope="module")
def paper(tmp_path_factory, fresh_config):
    """Two backends x two workloads x three trials (art 3 s/update, skyrl 2 s/update, a little
    noise per trial); skyrl/long_generation trial 3 breaks a forced length."""
    ws = tmp_path_factory.mktemp("paper")
    suite = "fixture2"
    spec = _spec(fresh_config(), suite, BACKENDS)
    ev = ws / "results" / "evidence"

    def calls_for(b, w, t, completed):
        if (b, w, t) != ("skyrl", "long_generation", 3):
            return None
        calls = default_calls(UPDATES, completed, [u % 4 + 1 for u in UPDATES], 4)
        calls[5]["completion_tokens"] += 3
        return calls

    summaries = trial_summaries(ws, spec, TRIALS, 0.01, calls_for)
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
    """`bench paper sources` in its own process: torch, NVML, the runner and the backends' run code are never
    imported. The backend registry's descriptors are (the spec is validated against the schema, whose backend
    list comes from the registry), so a backend's package, what its descriptor declares (its `contract`
    constants, its `host` hooks) and the framework kit's descriptor builder may load, nothing more."""
    args = ["paper", "sources", "--spec", str(paper.ws / "spec.json"), "--summaries",
            *map(str, paper.inputs["summary_paths"]), "--plans", *map(str, paper.inputs["plan_paths"]),
            "--evidence-root", str(paper.inputs["evidence_root"]),
            "--attempts-index", str(paper.inputs["attempts_index"]), "--out", str(tmp_path / "src")]
    write_spec(paper.spec.doc, paper.ws / "spec.json")
    code = ("import sys; from rl_pipeline_bench.cli import main; rc = main(sys.argv[1:]); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pynvml', 'transformers') "
            "or m.startswith(('rl_pipeline_bench.runs.runner', 'rl_pipeline_bench.leases')) "
            "or (m.startswith('rl_pipeline_bench.backends.') and m.count('.') > 2 "
            "and not m.endswith(('.contract', '.host')) and m != 'rl_pipeline_bench.backends.framework.backend')); "
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


def test_workflow_paper_target_from_retained_evidence(smoke_workdir, tmp_path):
    """`snakemake reports/paper` schedules only the paper rules, leaves evidence and the attempts
    index untouched, lays out every page (the smoke run's real Infrastructure tables included)
    and rebuilds byte for byte after `rm -rf reports/paper*`."""
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
    pages = tmp_path / "pages"
    pages.mkdir()
    paper_dir = smoke_workdir / "reports" / "paper"
    assert _page_problems(paper_dir / "paper.pdf", (paper_dir / "paper.tex").read_text(), pages) == []
    text = _pdf_text(paper_dir / "paper.pdf")
    assert "< 60 s" in text and "> 500 MB/s" in text and "¡" not in text and "¿" not in text
    assert {"tables/headline.tex", "tables/trainer.tex", "tables/validation.tex", "figures/timelines.pdf",
            "figures/offered_multi_turn.pdf"} <= set(first)
    shutil.rmtree(smoke_workdir / "reports" / "paper")
    shutil.rmtree(smoke_workdir / "reports" / "paper_sources")
    assert snakemake(smoke_workdir, "reports/paper").returncode == 0
    assert _tree(smoke_workdir / "reports" / "paper") == first
    assert _digest(smoke_workdir / "results" / "evidence") == evidence
    assert (smoke_workdir / "results" / "attempts.jsonl").read_bytes() == index


# --------------------------------------------------------------------------- the compiled pages

def _text_block(paper_tex: str) -> tuple[float, float, float]:
    """(left, right, bottom) edge of the text block in PDF points, from paper.tex's own page
    geometry and the article class's 10pt head (headheight 12pt + headsep 25pt)."""
    import re

    def inches(name: str) -> float:
        return float(re.search(rf"\\setlength{{\\{name}}}{{(-?[\d.]+)in}}", paper_tex).group(1))

    left = 72 * (1 + inches("oddsidemargin"))
    top = 72 * (1 + inches("topmargin")) + 12 + 25
    return left, left + 72 * inches("textwidth"), top + 72 * inches("textheight")


def _page_problems(pdf: Path, paper_tex: str, tmp: Path) -> list[str]:
    """What is wrong on the rendered pages: ink left or right of or below the text block, a table captioned
    for one section printed under another (or under none)."""
    import re

    import numpy as np
    from PIL import Image

    for tool in ("pdftoppm", "pdftotext"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: `sudo bash .ci/setup_tex.sh` (poppler-utils)")
    left, right, bottom = _text_block(paper_tex)
    problems = []
    # Every page as a 72 dpi greyscale image: one pixel per PDF point.
    subprocess.run(["pdftoppm", "-r", "72", "-gray", "-png", str(pdf), str(tmp / "page")], check=True)
    pages = sorted(tmp.glob("page-*.png"))
    assert pages, "pdftoppm rendered no page"
    for png in pages:
        ink = np.asarray(Image.open(png).convert("L")) < 160
        cols = np.flatnonzero(ink.any(axis=0))
        if len(cols) and (cols.max() > right + 2 or cols.min() < left - 2):
            problems.append(f"{png.name}: ink from x={cols.min()} to x={cols.max()} pt, text block {left:g}-{right:g} pt")
        # Between the text block and the page number (footskip 30pt, digits about 7pt high): a page
        # whose content ran past the bottom (a table taller than the page).
        if ink[int(bottom) + 3:int(bottom) + 20].any():
            problems.append(f"{png.name}: ink below the text block's bottom at {bottom:g} pt")
    # Reading order: each "Table N: Section: ..." caption lies under that section's heading.
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    sections = re.findall(r"\\section\{([^}]*)\}", paper_tex)
    heading = None
    for line in text.splitlines():
        if line.strip() in sections:
            heading = line.strip()
        c = re.match(r"Table \d+: (Infrastructure|Evaluation):", line.strip())
        if c and heading != c.group(1):
            problems.append(f"{line.strip()[:60]!r} is printed under section {heading!r}")
    return problems


def _pdf_text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def infra_paper(paper, tmp_path_factory):
    """The fixture paper with an Infrastructure section: a real storage probe (fio or Python, 4 MiB)
    and TEST FIXTURE all-reduce records (test_report_infra), two of them labelled with text that
    starts with `[` the way a user may label a probe."""
    from test_report_infra import _allreduce_fixture

    from rl_pipeline_bench.evidence.store import atomic_write_json
    from rl_pipeline_bench.probes.storage import run_storage_probe

    ws = tmp_path_factory.mktemp("infra_paper")
    probes = ws / "probes"
    probes.mkdir()
    atomic_write_json(probes / "storage.json", run_storage_probe(ws / "scratch", 4 << 20, label="smoke",
                                                                log=lambda m: None))
    for name, rec in {"baseline": _allreduce_fixture("[baseline] smoke", "gloo", 2, [], 0.5),
                      "pt": _allreduce_fixture("[3pt]", "gloo", 2, [], 0.5),
                      "h200x8": _allreduce_fixture("h200x8", "nccl", 8, ["NVIDIA H200"] * 8, 0.005)}.items():
        atomic_write_json(probes / f"allreduce_{name}.json", rec)
    src = ws / "sources"
    render_paper_sources(out_dir=src, **paper.inputs, run_infra_paths=[], probe_paths=sorted(probes.glob("*.json")))
    return SimpleNamespace(src=src, ws=ws)


def test_pages_keep_tables_inside_the_text_block_and_under_their_section(infra_paper, tmp_path):
    """Every page rendered to an image: nothing outside the text block, no type below 6 pt, each
    Infrastructure table under the Infrastructure heading; `[...]` cells print, `<`/`>` are
    themselves (T1), units as in the HTML report."""
    _need_latexmk()
    pdf = compile_paper(infra_paper.src, tmp_path / "paper")
    tex = (infra_paper.src / "paper.tex").read_text()
    pages = tmp_path / "pages"
    pages.mkdir()
    assert _page_problems(pdf, tex, pages) == []
    text = _pdf_text(pdf)
    assert "[baseline] smoke" in text and "[3pt]" in text
    assert "> 500 MB/s" in text and "< 60" in text  # the storage target and the checkpoint targets' rows
    assert "¡" not in text and "¿" not in text
    assert "busbw GB/s" in text and "gbps" not in text and "mb per s" not in text
    assert "Every column: reports/tables/infra_storage.csv." in text
    assert "8x NVIDIA H200" in " ".join(text.split())


def test_fixture_paper_pages_are_laid_out(paper, tmp_path):
    _need_latexmk()
    pdf = compile_paper(paper.src, tmp_path / "paper")
    pages = tmp_path / "pages"
    pages.mkdir()
    assert _page_problems(pdf, (paper.src / "paper.tex").read_text(), pages) == []
