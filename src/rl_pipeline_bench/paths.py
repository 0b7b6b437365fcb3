"""Where the project's files live: the one home of the results and reports layout.

The workflow rules (rules/*.smk via rules/common.smk), the CLI defaults, `bench plan`,
the report and the benchmark scripts all take their paths from here, so a moved
directory is one edit. Each path exists twice: as a Snakemake pattern (`{wildcard}`
fields, relative to the workflow's directory) and as a function filling it in, relative
to `root` (default: the current directory, as the rules and the CLI write them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

#: Repository root (the directory holding Snakefile and config.yaml). Overridable
#: with RL_BENCH_ROOT so that tests can run the pipeline in a scratch copy.
ROOT = Path(os.environ.get("RL_BENCH_ROOT", Path(__file__).resolve().parents[2]))

CONFIG_PATH = ROOT / "config.yaml"
SCHEMA_PATH = ROOT / "schemas" / "config.schema.yaml"

RESULTS = "results"
REPORTS = "reports"

# -- Snakemake patterns (relative to the workflow directory) ----------------------------
SPEC_FILE = f"{RESULTS}/specs/{{spec}}.json"
SPEC_RUNS_DIR = f"{RESULTS}/runs/{{spec}}"
RUN_DIR = f"{SPEC_RUNS_DIR}/{{backend}}/{{workload}}/trial{{trial}}"
RUN_RECORD = f"{RUN_DIR}/run.json"
RUN_SUMMARY = f"{RUN_DIR}/summary.json"
RUN_INFRA = f"{RUN_DIR}/infra.json"
PLAN_FILE = f"{RESULTS}/workloads/{{spec}}/{{workload}}.parquet"
OFFERED_FIGURE = f"{RESULTS}/workloads/{{spec}}/{{workload}}.offered.png"
EVIDENCE_ROOT = f"{RESULTS}/evidence"
#: Every attempt's events (rl_pipeline_bench.evidence.attempts), beside the evidence root.
ATTEMPTS_INDEX = f"{RESULTS}/attempts.jsonl"
PROBE_RECORD = f"{RESULTS}/probes/{{spec}}/{{probe}}.json"
ALLREDUCE_SWEEP = f"{RESULTS}/probes/{{spec}}/allreduce.parquet"
FLOPS_CARD = f"{RESULTS}/probes/flops/{{model}}.json"
MODEL_RECORD = f"{RESULTS}/models/{{model}}.json"
HF_HOME = f"{RESULTS}/models/hf_home"
IMAGE_RECORD = f"{RESULTS}/images/{{backend}}.json"
RECIPE_RECORD = f"{RESULTS}/provenance/recipes/{{backend}}.json"
SOURCE_RECORD = f"{RESULTS}/provenance/source.json"
EVAL_ROOT = f"{RESULTS}/eval"
EVAL_DIR = f"{EVAL_ROOT}/{{esuite}}-{{ehash}}"
EVAL_SPEC_FILE = f"{EVAL_DIR}/spec.json"
EVAL_RUN_RECORD = f"{EVAL_DIR}/{{policy}}/run{{run}}/eval.json"
EVAL_SUMMARY = f"{EVAL_DIR}/{{policy}}/summary.json"
EVAL_EVIDENCE_ROOT = f"{RESULTS}/eval_evidence"
LIBERO_CONFIG_DIR = f"{EVAL_ROOT}/libero_config"
MLFLOW_STORE = f"{RESULTS}/mlflow"
MLFLOW_EXPORT_RECORD = f"{MLFLOW_STORE}/exported-{{suite}}.json"
REPORT_HTML = f"{REPORTS}/comparison.html"
REPORT_TABLES = f"{REPORTS}/tables"
REPORT_FIGURES = f"{REPORTS}/figures"
PAPER_SOURCES = f"{REPORTS}/paper_sources"
PAPER_DIR = f"{REPORTS}/paper"

#: The probes that write one record per spec (rules/probes.smk), in report order.
PROBE_RECORDS = ("allreduce", "storage", "checkpoint")


def _at(root: Path | str | None, pattern: str, **fields: Any) -> Path:
    return Path(root or ".") / pattern.format(**fields)


def spec_file(spec_id: str, root: Path | str | None = None) -> Path:
    return _at(root, SPEC_FILE, spec=spec_id)


def spec_runs_dir(spec_id: str, root: Path | str | None = None) -> Path:
    """The directory holding every run of a spec."""
    return _at(root, SPEC_RUNS_DIR, spec=spec_id)


def run_dir(spec_id: str, backend: str, workload: str, trial: int, root: Path | str | None = None) -> Path:
    return _at(root, RUN_DIR, spec=spec_id, backend=backend, workload=workload, trial=trial)


def plan_file(spec_id: str, workload: str, root: Path | str | None = None) -> Path:
    return _at(root, PLAN_FILE, spec=spec_id, workload=workload)


def offered_figure(spec_id: str, workload: str, root: Path | str | None = None) -> Path:
    return _at(root, OFFERED_FIGURE, spec=spec_id, workload=workload)


def evidence_root(root: Path | str | None = None) -> Path:
    return _at(root, EVIDENCE_ROOT)


def attempts_index(root: Path | str | None = None) -> Path:
    return _at(root, ATTEMPTS_INDEX)


def probe_records(spec_id: str, root: Path | str | None = None) -> list[Path]:
    """The spec's probe records (all-reduce, storage, checkpoint), in report order."""
    return [_at(root, PROBE_RECORD, spec=spec_id, probe=p) for p in PROBE_RECORDS]


def probe_record_pattern(probe: str) -> str:
    """One probe's record as a Snakemake pattern, `{spec}` left a wildcard."""
    return PROBE_RECORD.format(spec="{spec}", probe=probe)


def flops_card(model: str, root: Path | str | None = None) -> Path:
    return _at(root, FLOPS_CARD, model=model)


def model_record(model: str, root: Path | str | None = None) -> Path:
    return _at(root, MODEL_RECORD, model=model)


def image_record(backend: str, root: Path | str | None = None) -> Path:
    return _at(root, IMAGE_RECORD, backend=backend)


def recipe_record(backend: str, root: Path | str | None = None) -> Path:
    return _at(root, RECIPE_RECORD, backend=backend)


def source_record(root: Path | str | None = None) -> Path:
    return _at(root, SOURCE_RECORD)


class RunTarget(NamedTuple):
    """One benchmark run of a spec; its fields fill the RUN_* patterns (`RUN_RECORD.format(**t._asdict())`)."""

    spec: str
    backend: str
    workload: str
    trial: int


def run_targets(spec_id: str, backends: Sequence[str], workloads: Sequence[str], trials: int) -> list[RunTarget]:
    """Every run of a spec (backends x workloads x trials 1..trials), in that order.

    The trial count is the one asked for now (a RunSpec's `trials`), not part of the spec's id."""
    return [RunTarget(spec_id, b, w, t) for b in backends for w in workloads for t in range(1, trials + 1)]


class NotARegularFile(ValueError):
    """An input path that exists but is a FIFO, socket, device or directory: reading it would block or fail."""


def require_regular_file(path: Path | str, what: str) -> None:
    """Refuse `path` when it exists but is not a regular file (a FIFO would block the reader forever).

    A missing path passes: each reader names that itself.
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file (a FIFO, socket or device)"
        raise NotARegularFile(f"{what} {path} is {kind}")
