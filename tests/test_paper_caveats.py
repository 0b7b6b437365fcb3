"""The paper keeps the HTML report's caveats: noise notes, rollout activity, CVs, readable figures, plain units.

Sources only (no LaTeX run: tests/test_paper.py compiles and checks the pages). Evidence is
TEST FIXTURE evidence through the real contract code, two backends x two workloads x two
trials, so every row carries the few-trials note and skyrl's windows end in a drain.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report import BACKENDS, _plans, _spec, trial_summaries  # noqa: E402
from test_report_infra import _allreduce_fixture  # noqa: E402

from rl_pipeline_bench.evidence.attempts import seed_index  # noqa: E402
from rl_pipeline_bench.records.atomicfile import atomic_write_json  # noqa: E402
from rl_pipeline_bench.report.figures import PAPER_WIDTH_IN  # noqa: E402
from rl_pipeline_bench.report.paper import render_paper_sources  # noqa: E402


@pytest.fixture(scope="module")
def sources(tmp_path_factory, fresh_config) -> Path:
    ws = tmp_path_factory.mktemp("caveats")
    spec = _spec(fresh_config(), "fixture2", BACKENDS)
    ev = ws / "results" / "evidence"
    summaries = trial_summaries(ws, spec, (1, 2), 0.08)
    index = ws / "results" / "attempts.jsonl"
    seed_index(ev, index)
    probes = ws / "probes"
    probes.mkdir()
    atomic_write_json(probes / "allreduce.json", _allreduce_fixture("h200x8", "nccl", 8, ["NVIDIA H200"] * 8, 1e-5))
    render_paper_sources(summaries, _plans(ws, spec), ev, ws / "src", "fixture2", spec, attempts_index=index,
                         run_infra_paths=[], probe_paths=[probes / "allreduce.json"])
    return ws / "src"


def test_tables_one_and_two_carry_the_cv(sources):
    for name in ("headline", "measured"):
        tex = (sources / "tables" / f"{name}.tex").read_text()
        assert "CV traj." in tex and "CV tokens" in tex, name
        assert re.search(r"& 5\.1\\% &", tex), tex  # the fixture's trial spread: CV 5.1 %


def test_the_noise_notes_and_rollout_activity_are_tables(sources):
    paper = (sources / "paper.tex").read_text()
    assert "\\input{tables/notes.tex}" in paper and "\\input{tables/activity.tex}" in paper
    notes = (sources / "tables" / "notes.tex").read_text()
    assert notes.count("2 trials (< 3): spread unreliable") == 4 and "generation stopped early" in notes
    activity = (sources / "tables" / "activity.tex").read_text()
    assert "generation\\_stopped\\_early" in activity and "busy share" in activity
    comparisons = (sources / "tables" / "comparisons.tex").read_text()
    assert "not resolved" in comparisons and "resolved only when each has at least 3 valid trials" in comparisons


def test_the_all_reduce_table_has_plain_units_and_separated_byte_counts(sources):
    tex = (sources / "tables" / "infrastructure_allreduce.tex").read_text()
    assert "time ($\\mu$s)" in tex and "(us)" not in tex
    assert "1\\,073\\,741\\,824" in tex  # 1 GiB, thousands set apart
    assert not re.search(r"\de[-+]\d", tex), tex  # no e-notation anywhere


def test_figures_are_drawn_at_the_papers_text_width(sources):
    """Drawn at 6.3 in and included at \\linewidth, the figure text prints at its own size (8 pt), not 5."""
    for pdf in sorted((sources / "figures").glob("*.pdf")):
        box = re.search(rb"/MediaBox \[ ?0 0 ([\d.]+) ([\d.]+) ?\]", pdf.read_bytes())
        assert box and float(box.group(1)) == pytest.approx(PAPER_WIDTH_IN * 72), pdf.name
    assert "\\setlength{\\textwidth}{6.3in}" in (sources / "paper.tex").read_text()
