"""The version ledger: every record kind the project writes, its current version and its history.

Each record (and each versioned algorithm whose tag is mixed into seeds or recorded beside
results) has one entry here; its `schema` string, `rl-bench/KIND/vN`, is made only from it,
so no module spells a version of its own and a reader can say which versions exist. A
change to what a record holds or means bumps its version and adds a history line.
Standard library only: provenance reads it inside images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

PREFIX = "rl-bench/"


@dataclass(frozen=True)
class RecordFormat:
    """kind: the record's name; version: the one this code writes; holds: what and where it is;
    history: {version: what that version changed}."""

    kind: str
    version: int
    holds: str
    history: Mapping[int, str]

    @property
    def schema(self) -> str:
        return f"{PREFIX}{self.kind}/v{self.version}"

    @property
    def family(self) -> str:
        """The prefix every version of this kind shares (`rl-bench/KIND/`)."""
        return f"{PREFIX}{self.kind}/"


def _first(text: str) -> Mapping[int, str]:
    return {1: text}


_FORMATS = (
    # -- benchmark runs: settings, evidence and what is derived from it
    RecordFormat("run-spec", 1, "a suite's resolved settings, keyed by their hash",
                 _first("settings, about, id, hash")),
    RecordFormat("evidence", 1, "the evidence contract v1 (DESIGN)",
                 _first("manifest + updates, calls, trainer_intervals tables")),
    RecordFormat("run", 1, "a run's declared output, pointing at its evidence",
                 _first("evidence_dir, identity, evidence_digest")),
    RecordFormat("summary", 1, "rates and validity derived from evidence",
                 _first("e2e/trainer windows, valid, reasons, warnings, seals")),
    RecordFormat("contract-rules", 3, "the rule set a summary applied (recorded in every summary)",
                 {1: "windows, contiguity, forced lengths, ranks, acceptance",
                  2: "calls of extra offered updates must not be accepted; rollout activity and warnings per run",
                  3: "the files reconciled with each other and the manifest's identity (contract.reconcile)"}),
    RecordFormat("attempt-event", 1, "one line per started, finished or summarized attempt",
                 _first("event, run_id, time, status")),
    RecordFormat("run-infra", 1, "telemetry per phase and trainer MFU of one run",
                 _first("telemetry, trainer_efficiency")),
    RecordFormat("workload", 1, "the plan's seed domain: mixed into every call's seed (plan.workloads)",
                 _first("call_seed over (workload, seed, update, group, trajectory, call)")),
    RecordFormat("render", 1, "the seed domain of rendered text (plan.render)", _first("word draws per call")),
    # -- provenance, images and models
    RecordFormat("recipe", 1, "sha256 over a backend's recipe files",
                 _first("sha256, files")),
    RecordFormat("source", 1, "sha256 over the benchmark's own source",
                 _first("sha256, files")),
    RecordFormat("setup", 1, "PREFIX/setup_manifests/{backend}.json: a native environment's setup facts",
                 _first("backend, recipe, facts")),
    RecordFormat("image", 1, "a built image's id, digest and labels",
                 _first("id, digest, labels, recipe and source sha256")),
    RecordFormat("container", 1, "the control file a container run reads (runs.container_run)",
                 _first("command, env, mounts")),
    RecordFormat("model", 1, "a pinned snapshot's repo, revision and file hashes",
                 _first("repo_id, revision, files")),
    RecordFormat("reference-build", 1, "the build record saved inside an embedded reference model's snapshot",
                 _first("build_config")),
    RecordFormat("model-flops", 1, "the model's matmul inventory (FLOPs card)",
                 _first("matmul_params, per-token FLOPs")),
    # -- infrastructure probes
    RecordFormat("probe-allreduce", 1, "all-reduce bandwidth sweep",
                 _first("sizes, algbw, busbw")),
    RecordFormat("probe-storage", 1, "storage read/write throughput",
                 _first("fio or direct-I/O results")),
    RecordFormat("probe-checkpoint", 1, "checkpoint save/load times",
                 _first("model and adapter save/load seconds")),
    RecordFormat("probe-gemm", 1, "a GEMM throughput probe's record", _first("TFLOP/s per shape")),
    # -- leases and clusters
    RecordFormat("lease", 1, "a GPU lease's reservation record under the lock directory",
                 _first("gpus, run_id, supervisor, status")),
    RecordFormat("k8s-qualification", 1, "a Kubernetes qualification run's record", _first("pods, runs, verdict")),
    # -- task-quality evaluation
    RecordFormat("eval-spec", 1, "an evaluation suite's resolved settings",
                 _first("benchmark, tasks, scenarios, runs, hash")),
    RecordFormat("eval-evidence", 1, "one evaluation run's evidence",
                 _first("manifest + episodes table")),
    RecordFormat("eval-summary", 1, "success rates per run of one policy",
                 _first("success rate per run, mean, reasons")),
)

#: Every record kind by name.
LEDGER: dict[str, RecordFormat] = {f.kind: f for f in _FORMATS}


def schema_of(kind: str) -> str:
    """The schema string this code writes for `kind` (KeyError for a kind not in the ledger)."""
    return LEDGER[kind].schema
