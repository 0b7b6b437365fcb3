"""One benchmark run: fresh evidence directory, manifest, backend, run.json.

The runner is the only place that starts a backend. It creates the evidence
directory before anything can fail, so every invocation leaves a record, and it
writes the declared `run.json` only after the backend finished cleanly.
"""

from __future__ import annotations

import os
import shlex
import sys
import traceback
from pathlib import Path
from typing import Any

import pandas as pd

from ..evidence import attempts, progress
from . import image_runs
from ..plan import workloads as wl
from ..plan.workloads import WorkloadSpec
from .. import backends
from ..backends.context import RunContext
from ..records.atomicfile import atomic_write_json
from ..records.configfile import ConfigError, check_member
from ..evidence.store import RUN_LOG, EvidenceWriter
from ..records.timestamps import new_run_id
from ..host.hostinfo import host_info
from ..paths import ROOT, evidence_root
from ..probes.telemetry import beside_run
from ..provenance.recipes import native_identity
from ..records.redaction import redact_text, register_run_variables
from ..settings.spec import RunSpec, SpecError
from ..records.formats import schema_of
from ..records.jsonfile import read_json

RUN_SCHEMA = schema_of("run")


class RunRecordExists(ConfigError):
    """The run.json a run was told to write already records another run."""


def load_model_record(path: Path) -> dict[str, Any]:
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return read_json(path, "model identity record", ConfigError,
                     hint=f"Build it first with `uv run snakemake --cores 1 {shown}`")


def _read_json(path: Path | None, what: str) -> dict[str, Any] | None:
    if path is None or not Path(path).exists():
        return None
    return read_json(path, what, ConfigError)


def _lease_fields() -> dict[str, Any]:
    """GPUs and GPU set of the lease this run executes under (None for CPU runs)."""
    from ..leases import current_lease, current_lease_gpus

    record = current_lease()
    if record is None:
        return {"gpus": None, "lease": None}
    return {
        "gpus": current_lease_gpus(),
        "lease": {k: record.get(k) for k in ("run_id", "gpu_set_index", "gpu_spec", "gpu_specs")},
    }


def _slurm_fields() -> dict[str, Any]:
    """The SLURM job (id, node, allocation) this run executes in; None outside SLURM."""
    from ..host.slurm import SlurmAllocationError, current_job, unverified_reason

    try:
        job = current_job()
    except SlurmAllocationError as exc:  # recorded, not fatal: a CPU run needs no GPU ids
        return {"slurm": {"error": str(exc)}}
    untrusted = unverified_reason(job) if job else None
    if untrusted is not None:  # variables without a job: not recorded as one
        return {"slurm": {"error": f"the environment names {job.describe()}, but {untrusted}"}}
    return {"slurm": job.to_dict() if job else None}


def offered_plan_for(run_spec: RunSpec, workload: str, plan_path: Path | None = None) -> tuple[WorkloadSpec, pd.DataFrame]:
    """The workload spec and offered plan of a run; a given plan file must belong to this spec."""
    workload_spec, fresh, _ = wl.spec_plan(run_spec, workload)
    if plan_path is None or not Path(plan_path).exists():
        return workload_spec, fresh
    meta = wl.read_plan_meta(plan_path)
    if meta.get("spec_hash") != run_spec.hash:
        raise SpecError(f"offered plan {plan_path} was written for spec hash {meta.get('spec_hash')}, "
                        f"but this run is spec {run_spec.id} (hash {run_spec.hash})")
    return workload_spec, wl.read_plan(plan_path)


def execute_run(
    run_spec: RunSpec,
    backend: str,
    workload: str,
    trial: int,
    model_record: Path,
    plan_path: Path | None = None,
    run_json: Path | None = None,
    recipe_record: Path | None = None,
    source_record: Path | None = None,
    image_record: Path | None = None,
    evidence_dir_root: Path | None = None,
    command: list[str] | None = None,
    attempts_index: Path | None = None,
    run_id: str | None = None,
    replace_run_json: bool = False,
) -> int:
    """Run one (spec, backend, workload, trial); return the process exit code.

    The attempt is appended to the attempts index (default: beside the evidence root)
    when its evidence directory exists and again when it ends, failed runs included.
    A `runtime: container` run started on the host runs this same function inside the
    backend's image (rl_pipeline_bench.runs.image_runs), under the host's lease and run id.
    An existing `run_json` is never replaced unless `replace_run_json` says so: it is
    refused before the run starts, and a record that appeared meanwhile (another run
    given the same path) is kept, this run's evidence too (exit code 1).
    """
    if run_json is not None and not replace_run_json and os.path.lexists(run_json):
        raise RunRecordExists(f"{run_json} exists: it records an earlier run, which bench run does not replace "
                              "(re-run as the README's 'Re-running a benchmark' says: delete it first, or pass "
                              "--replace-run-json)")
    descriptor = backends.get(backend)  # an unknown name fails listing the registered backends
    if backend not in run_spec.backends:
        raise ConfigError(f"backend '{backend}' is not in spec {run_spec.id} (its backends: {', '.join(run_spec.backends)})")
    check_member("workload", workload, run_spec.workloads)
    # Any trial number >= 1 is a run of this spec: the trial count is not part of its identity
    # (raising `trials` adds runs beside the finished ones, docs/run-spec.md).
    if trial < 1:
        raise ConfigError(f"trial {trial} is not a trial number (1, 2, ...) for spec {run_spec.id}")
    model = load_model_record(Path(model_record))
    from ..models.identity import check_model_record

    check_model_record(model, run_spec.settings["model"], f"model record {model_record}")  # the spec's model, no other
    workload_spec, plan = offered_plan_for(run_spec, workload, plan_path)
    contract = dict(run_spec.settings["contract"])
    contract["trainer_ranks"] = [int(r) for r in descriptor.trainer_ranks(run_spec)]
    contract["offered_trajectories_per_update"] = int(workload_spec.trajectories_per_update)
    # The plan's identities per update, which the summary reconciles the calls with.
    contract["offered_plan"] = {"groups_per_update": int(workload_spec.groups_per_update),
                                "group_size": int(workload_spec.group_size),
                                "calls_per_trajectory": int(workload_spec.new_calls)}

    root = Path(evidence_dir_root or evidence_root(ROOT))
    index = Path(attempts_index) if attempts_index is not None else attempts.index_for(root)
    if run_spec.runtime == "container" and not image_runs.in_place():
        host = image_runs.HostRun(run_spec, backend, workload, trial, model, Path(model_record), root, index,
                                  image_record, plan_path, recipe_record, source_record)
        run_id = run_id or new_run_id(run_spec.suite_name, backend, workload, trial)
        code, evidence_dir = image_runs.execute_in_image(host, run_id)
        if code == 0 and run_json is not None:
            code = _record_run(Path(run_json), run_id, evidence_dir, run_spec, backend, workload, trial,
                               replace_run_json)
        print(f"bench: container run {run_id} {'completed' if code == 0 else 'FAILED'}; evidence in {evidence_dir}",
              file=sys.stdout if code == 0 else sys.stderr, flush=True)
        return code

    recipe = _read_json(recipe_record, "recipe record") or {}
    source = _read_json(source_record, "source record") or {}
    image = _read_json(image_record, "image record")
    if run_spec.runtime == "native":
        # What setup ran is only known from the prefix's setup manifests; the recipe
        # hash of a native run is what was requested, not proven by an image.
        identity = native_identity(backend, os.environ.get("RL_BENCH_ENV_ROOT"), ROOT)
    else:  # in the image: the container (if this project started it) and the hashes recomputed here
        identity = image_runs.in_container_identity(backend, ROOT)
    manifest = {
        "backend": backend,
        "workload": workload,
        "suite": run_spec.suite_name,
        "trial": trial,
        "spec": {"id": run_spec.id, "hash": run_spec.hash,
                 "path": str(run_spec.path) if run_spec.path is not None else None},
        "contract": contract,
        "model": {k: model.get(k) for k in ("model", "source", "repo_id", "revision", "snapshot_path")},
        "recipe_sha256": recipe.get("sha256"),
        "source_sha256": source.get("sha256"),
        "image": image,
        "runtime": run_spec.runtime,
        "provenance": identity,
        "device": run_spec.device,
        "scale": workload_spec.scale,
        "seed": run_spec.seed,
        **_lease_fields(),
        **_slurm_fields(),
        "host": host_info(descriptor.packages, descriptor.package_homes() if descriptor.package_homes else None),
        "command": shlex.join(command or sys.argv),
        "env": dict(os.environ),
    }
    if descriptor.preload is not None:  # heavy framework imports happen before the evidence clock starts
        descriptor.preload()
    run_id = run_id or new_run_id(run_spec.suite_name, backend, workload, trial)
    label = progress.run_label(backend, workload, trial)
    total_updates = run_spec.trained_updates
    # The backend's own variables (its descriptor) are recorded beside the common ones.
    register_run_variables(descriptor.run_variables, descriptor.env_prefixes)
    done = {"updates": 0}  # for the line a stopped run ends with

    def on_update(row: dict) -> None:
        done["updates"] = int(row["update"])
        printer(row)

    printer = progress.update_printer(label, total_updates)
    writer = EvidenceWriter(root, run_id, manifest, on_update=on_update, env_prefixes=descriptor.env_prefixes)
    attempts.append_event(index, "started", run_id, **attempts.started_fields(writer.manifest, writer.path))
    progress.emit(f"{label}: started, {total_updates} updates; evidence in {writer.path}")

    def record_end() -> None:
        m = writer.manifest
        attempts.append_event(index, "finished", run_id, status=m["status"], finished_at=m["finished_at"],
                              error=attempts.error_gist(m.get("error")))

    ctx = RunContext(run_spec, backend, workload, workload_spec, trial, plan, model, writer, contract)
    try:
        if identity["runtime"] == "container":
            _refuse_unproven_image(identity)
            image_runs.stop_on_sigterm()
        # GPU telemetry beside the run, on exactly the leased GPUs; never a reason for the run to fail.
        with beside_run(writer, manifest["gpus"], run_spec.probes["telemetry"]):
            descriptor.run(ctx)
    except BaseException as exc:  # record every failure, including Ctrl-C, then re-signal it
        writer.logger.error("run failed: %s", exc)
        writer.finish("failed", error="".join(traceback.format_exception(exc)))
        record_end()
        interrupted = isinstance(exc, KeyboardInterrupt)
        what = "interrupted" if interrupted else f"FAILED ({redact_text(str(exc)) or type(exc).__name__})"
        progress.emit(f"{label}: {what} after {writer.clock():.0f} s at update {done['updates']}/{total_updates}; "
                      f"evidence kept in {writer.path} (log: {writer.path / RUN_LOG})")
        if interrupted:
            raise
        return 1
    writer.finish("completed")
    record_end()
    progress.emit(f"{label}: completed in {writer.clock():.0f} s: {_rates(writer.path)}")
    if run_json is not None and _record_run(Path(run_json), run_id, writer.path, run_spec, backend, workload, trial,
                                            replace_run_json):
        return 1
    print(f"bench: run {run_id} completed; evidence in {writer.path}", flush=True)
    return 0


def _rates(evidence_dir: Path) -> str:
    """The finished run's rates, from the contract's own summary of its evidence (the summary job's numbers)."""
    from ..contract.summary import summarize

    try:
        return progress.rates_text(summarize(evidence_dir))
    except Exception as exc:  # the rates line is a courtesy: the summary job reports any real problem
        return f"rates not computed here ({type(exc).__name__}); `bench summarize {evidence_dir}` gives them"


def _refuse_unproven_image(identity: dict[str, Any]) -> None:
    """Fail the run before the backend starts when the image is not what its labels say."""
    if not identity["in_image"]["matches"]:
        raise RuntimeError("the image's contents are not what it was built and labelled with: "
                           + "; ".join(identity["in_image"]["problems"]))


def _record_run(path: Path, run_id: str, evidence_dir: Path, run_spec: RunSpec, backend: str, workload: str,
                trial: int, replace: bool) -> int:
    """Write run.json (0); 1 when one appeared meanwhile (another run given the same path), which is kept."""
    try:
        _write_run_json(path, run_id, evidence_dir, run_spec, backend, workload, trial, replace=replace)
    except FileExistsError:
        print(f"bench: run {run_id} completed, but {path} appeared meanwhile (another run given the same "
              f"--run-json) and is kept; this run's evidence is in {evidence_dir}", file=sys.stderr, flush=True)
        return 1
    return 0


def _write_run_json(path: Path, run_id: str, evidence_dir: Path, run_spec: RunSpec, backend: str, workload: str,
                    trial: int, replace: bool = False) -> None:
    from ..evidence.digest import evidence_digest

    path.parent.mkdir(parents=True, exist_ok=True)
    evidence_dir = Path(evidence_dir).resolve()
    cwd = Path.cwd().resolve()
    # Relative to the working directory (the workflow's root) when inside it, so a
    # results/ tree stays valid when the checkout moves.
    shown = evidence_dir.relative_to(cwd) if evidence_dir.is_relative_to(cwd) else evidence_dir
    record = {
        "schema": RUN_SCHEMA,
        "run_id": run_id,
        "evidence_dir": str(shown),
        "suite": run_spec.suite_name,
        "spec_id": run_spec.id,
        "spec_hash": run_spec.hash,
        "backend": backend,
        "workload": workload,
        "trial": trial,
        # The evidence as the run left it: the summarize rule compares against it (evidence_digest.edited_evidence).
        "evidence_digest": evidence_digest(evidence_dir),
    }
    atomic_write_json(path, record, replace=replace)
