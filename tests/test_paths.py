"""The results layout has one home (rl_pipeline_bench.paths): the rules, the CLI, `bench plan`,
the report and the benchmark scripts take their paths from it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from rl_pipeline_bench import paths
from rl_pipeline_bench.paths import ROOT
from rl_pipeline_bench.settings.spec import RunSpec

#: A results or reports path written out (what only paths.py may hold).
LAYOUT_LITERAL = re.compile(r"\b(results|reports)/(specs|runs|evidence|workloads|probes|models|images|provenance|"
                            r"eval|eval_evidence|mlflow|attempts\.jsonl|comparison\.html|tables|figures|paper)\b")


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a Python file that are code, not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def test_layout_is_written_out_only_in_paths_py():
    found = []
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "workflow_scripts").glob("*.py")]:
        if path == ROOT / "src/rl_pipeline_bench/paths.py":
            continue
        found += [f"{path.relative_to(ROOT)}:{line}: {text!r}" for line, text in _code_strings(path)
                  if LAYOUT_LITERAL.search(text)]
    for path in [ROOT / "Snakefile", *(ROOT / "rules").glob("*.smk")]:
        for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = text.split("#", 1)[0]
            if LAYOUT_LITERAL.search(code):
                found.append(f"{path.relative_to(ROOT)}:{line}: {text.strip()}")
    assert not found, "results paths written out beside rl_pipeline_bench.paths:\n" + "\n".join(found)


def test_run_targets_are_backends_by_workloads_by_trials():
    targets = paths.run_targets("s-0123456789ab", ["a", "b"], ["w"], 2)
    assert [(t.backend, t.workload, t.trial) for t in targets] == [("a", "w", 1), ("a", "w", 2), ("b", "w", 1), ("b", "w", 2)]
    assert paths.run_dir(*targets[3]) == Path("results/runs/s-0123456789ab/b/w/trial2")
    assert paths.RUN_RECORD.format(**targets[0]._asdict()) == "results/runs/s-0123456789ab/a/w/trial1/run.json"


def test_bench_plan_lists_the_layouts_targets():
    """`bench plan --json` names the same run.json and probe files as paths (which the rules use)."""
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "plan", "--suite", "smoke", "--json"],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    plan = json.loads(proc.stdout)
    spec_id = plan["spec"]["id"]
    spec = RunSpec(plan["spec"])
    expected = [paths.RUN_RECORD.format(**t._asdict())
                for t in paths.run_targets(spec_id, spec.backends, spec.workloads, spec.trials)]
    assert [r["target"] for r in plan["runs"]] == expected
    assert plan["probes"] == [str(p) for p in paths.probe_records(spec_id)]
