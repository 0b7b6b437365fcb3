"""`runtime: container`: the host's `bench run` runs the same benchmark inside the backend's image.

The host keeps the lease (it runs under `bench lease run`) and decides the run id. It
checks that the image is still the one the preflight proved, then starts `bench run`
inside it (rl_pipeline_bench.runs.container_run) with only these mounted, at their host
paths: the evidence root and the attempts index (read-write), the model cache and the
run's spec, input and provenance records (read-only). The leased GPUs go in as device
requests, the image's baked hashes as environment. Inside, `bench run` writes the
evidence and records the container and its own recomputation of the baked hashes in
the manifest (`in_container_identity`). The host writes run.json only when the
container exited 0 and its evidence says completed; a container that died before
writing evidence still leaves a failed evidence directory.

Where the image's own environment says `RL_BENCH_RUNTIME=container` (inside a
container this module started, or a Kubernetes pod running the image), `bench run`
runs in place: containers are never nested.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import container_run
from ..provenance import images, recipes as provenance
from .. import backends, paths
from .container_run import Mount, bind
from ..records.jsonfile import JsonFileError, read_json


#: Set by every backend image (its Dockerfile's ENV): this process already runs in the image.
RUNTIME_ENV = "RL_BENCH_RUNTIME"


def in_place(env: Mapping[str, str] | None = None) -> bool:
    """True where a container suite's run executes here, not in a new container: in the image
    (its ENV says RL_BENCH_RUNTIME=container: a container run_container started, or a pod)."""
    env = os.environ if env is None else env
    return env.get(RUNTIME_ENV) == "container" or bool(env.get(container_run.CONTROL_ENV))


def model_cache(model: Mapping[str, Any]) -> Path | None:
    """The HF_HOME holding the run's model snapshot (mounted read-only), from its identity record."""
    if model.get("hf_home"):
        return Path(model["hf_home"])
    snapshot = model.get("snapshot_path")
    return Path(snapshot) if snapshot else None


def run_mounts(evidence_root: Path, model: Mapping[str, Any], inputs: Sequence[Path | str],
               lease_record: str | None = None, writable: Sequence[Path | str] = ()) -> list[Mount]:
    """Evidence read-write (the evidence root, and `writable` files such as the attempts index);
    the model cache, the input/provenance records and the lease record read-only."""
    Path(evidence_root).mkdir(parents=True, exist_ok=True)
    mounts = [bind(evidence_root, read_only=False)]
    for path in writable:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).touch()
        mounts.append(bind(path, read_only=False))
    cache = model_cache(model)
    if cache is not None:
        mounts.append(bind(cache))
    mounts += [bind(p) for p in dict.fromkeys(str(Path(p).resolve()) for p in inputs if p)]
    if lease_record:
        mounts.append(bind(lease_record))
    unique: dict[str, Mount] = {}
    for m in mounts:  # one mount per path, the first (evidence read-write) wins
        unique.setdefault(m.path_inside, m)
    return list(unique.values())


def container_environment(labels: Mapping[str, str], model: Mapping[str, Any],
                          lease_record: str | None = None, gpu_uuids: Sequence[str] = (),
                          visible_devices: Callable[[Sequence[str]], str] = ",".join) -> dict[str, str]:
    """What the in-container run needs besides the image's own environment.

    The engine exposes exactly the leased GPUs; CUDA_VISIBLE_DEVICES names them as the
    backend's framework accepts (`visible_devices`: its descriptor's container_visible_devices;
    by UUID unless it says otherwise). The manifest records the lease's UUIDs either way.
    """
    from ..host.liveness import SUPERVISOR_ENV, process_identity

    env = {
        provenance.BAKED_RECIPE_ENV: labels.get(images.LABEL_RECIPE, ""),
        provenance.BAKED_SOURCE_ENV: labels.get(images.LABEL_SOURCE, ""),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        # The manifest names this host process (which waits for the container) as the run's supervisor.
        SUPERVISOR_ENV: json.dumps(process_identity()),
    }
    cache = model_cache(model)
    if model.get("hf_home") and cache is not None:
        env["HF_HOME"] = str(cache)
    if lease_record:
        from ..leases import RECORD_ENV

        env[RECORD_ENV] = str(Path(lease_record).resolve())
    if gpu_uuids:
        env["CUDA_VISIBLE_DEVICES"] = visible_devices(gpu_uuids)
    return env


def container_name(run_id: str) -> str:
    return "rl-bench-" + re.sub(r"[^A-Za-z0-9_.-]", "-", run_id)[:200]


def run_in_image(
    backend: str,
    image_record: Mapping[str, Any],
    inner_args: Sequence[str],
    *,
    run_id: str,
    evidence_root: Path,
    model: Mapping[str, Any],
    inputs: Sequence[Path | str],
    writable: Sequence[Path | str] = (),
    network_mode: str = "none",
    host_config: Mapping[str, Any] | None = None,
    client=None,
    log: Callable[[str], None] = print,
) -> container_run.ContainerResult:
    """Start `bench <inner_args>` in the recorded image under this process's lease; wait until it is gone.

    The image must still carry the recipe and source identity the controller has now
    (labels; `bench preflight` recomputed them inside the image before the lease).
    """
    from ..leases import RECORD_ENV, current_lease_gpus

    checked = images.preflight(backend, record=image_record, client=client, verify_contents=False)
    labels = {images.LABEL_RECIPE: checked["recipe_sha256"], images.LABEL_SOURCE: checked["source_sha256"]}
    lease_record = os.environ.get(RECORD_ENV) or None
    gpus = current_lease_gpus() or []
    uuids = [g["uuid"] for g in gpus]
    mounts = run_mounts(evidence_root, model, inputs, lease_record, writable)
    return container_run.run_container(
        checked["image_id"], ["bench", *inner_args],
        mounts=mounts, environment=container_environment(labels, model, lease_record, uuids,
                                                          backends.get(backend).container_visible_devices),
        gpu_uuids=uuids, name=container_name(run_id),
        labels={container_run.LABEL_RUN: run_id, images.LABEL_BACKEND: backend},
        network_mode=network_mode, user=f"{os.getuid()}:{os.getgid()}", client=client, log=log,
        extra_host_config=host_config,
    )


def stop_on_sigterm() -> None:
    """In the image `bench run` is the container's PID 1, which gets SIGTERM only through a
    handler: an engine's stop then fails the run with its evidence kept, instead of a kill."""
    import signal

    def handler(signum, frame):
        raise container_run.ContainerInterrupted(signum)

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (tests): the caller's handling stays
        pass


def evidence_status(evidence_dir: Path) -> str | None:
    """The manifest's status of an evidence directory (None if there is no readable manifest)."""
    try:
        return read_json(Path(evidence_dir) / "manifest.json", "manifest").get("status")
    except (JsonFileError, AttributeError):
        return None


def in_container_identity(backend: str, root: Path | str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Provenance of the run inside the container: the container itself and its recomputed hashes.

    `in_image.matches` is false when the image's files, or the running code, are not
    what its labels say; the runner then fails the run before the backend starts.
    """
    control = container_run.read_control(env)
    in_image = provenance.in_image_identity(backend, root, env)
    return {
        "runtime": "container",
        "container": control,
        "in_image": in_image,
        "recipe_proof": ("in-container recomputation equals the image's labels" if in_image["matches"]
                         else "in-container recomputation DIFFERS from the image's labels: " + "; ".join(in_image["problems"])),
        "recipe_sha256": in_image["recipe_sha256"],
        "source_sha256": in_image["source_sha256"],
    }


@dataclass
class HostRun:
    """One container run as the host's `bench run` starts it (runner.execute_run fills it in)."""

    run_spec: Any
    backend: str
    workload: str
    trial: int
    model: Mapping[str, Any]
    model_record: Path
    evidence_root: Path
    attempts_index: Path
    image_record: Path | None
    plan: Path | None = None
    recipe_record: Path | None = None
    source_record: Path | None = None

    def inner_args(self, run_id: str, spec_file: Path) -> list[str]:
        """`bench run ...` inside the image: the same run, every path absolute (mounted at its host path)."""
        args = ["run", "--spec", str(spec_file), "--backend", self.backend, "--workload", self.workload,
                "--trial", str(self.trial), "--model-record", _abs(self.model_record),
                "--evidence-root", _abs(self.evidence_root), "--attempts-index", _abs(self.attempts_index),
                "--run-id", run_id]
        for flag, path in (("--plan", self.plan), ("--recipe-record", self.recipe_record),
                           ("--source-record", self.source_record), ("--image-record", self.image_record)):
            if path is not None and Path(path).exists():
                args += [flag, _abs(path)]
        return args

    def inputs(self, spec_file: Path) -> list[Path]:
        return [Path(p) for p in (spec_file, self.model_record, self.plan, self.recipe_record, self.source_record,
                                  self.image_record) if p is not None and Path(p).exists()]


def _abs(path: Path | str) -> str:
    return str(Path(path).resolve())


def execute_in_image(host: HostRun, run_id: str, *, client=None, log: Callable[[str], None] = print) -> tuple[int, Path]:
    """Run `host` inside its backend image; return (exit code, evidence directory).

    0 only when the container exited 0 and its evidence says completed; 128+N after
    signal N stopped it (SIGTERM, SIGINT). A container that never created its evidence
    directory (it could not start, or died first) gets a failed one from the host, so
    every attempt leaves a record.
    """
    from ..evidence import attempts
    from ..evidence.store import EvidenceWriter
    from ..settings.spec import write_spec

    if host.image_record is None:
        raise images.PreflightError(
            f"a runtime: container run needs its image record: pass --image-record {paths.image_record(host.backend)} "
            f"(built by `bench build --backend {host.backend}`)")
    record = images.load_image_record(host.image_record, host.backend)
    descriptor = backends.get(host.backend)
    evidence_dir = Path(host.evidence_root).resolve() / run_id
    result = None
    error = None
    with tempfile.TemporaryDirectory(prefix="rl-bench-spec-") as scratch:
        spec_file = host.run_spec.path
        if spec_file is None:  # resolved from a config by hand: the container reads the same spec
            spec_file = write_spec(host.run_spec.doc, Path(scratch) / f"{host.run_spec.id}.json").path
        try:
            result = run_in_image(
                host.backend, record, host.inner_args(run_id, Path(spec_file).resolve()), run_id=run_id,
                evidence_root=host.evidence_root, model=host.model, inputs=host.inputs(Path(spec_file)),
                writable=[host.attempts_index], network_mode=descriptor.container_network,
                host_config=descriptor.container_host_config, client=client, log=log)
        except (images.ImageError, container_run.ContainerRunError, container_run.ContainerInterrupted) as exc:
            error = exc
    status = evidence_status(evidence_dir)
    if not evidence_dir.exists():  # the benchmark never started inside: the host records the attempt
        reason = error or f"container exited with {result.exit_code if result else '?'} before writing evidence"
        writer = EvidenceWriter(host.evidence_root, run_id, {
            "backend": host.backend, "workload": host.workload, "suite": host.run_spec.suite_name,
            "trial": host.trial, "spec": {"id": host.run_spec.id, "hash": host.run_spec.hash},
            "runtime": "container", "image": record, "container": result.as_dict() if result else None},
            env_prefixes=descriptor.env_prefixes)
        attempts.append_event(host.attempts_index, "started", run_id, **attempts.started_fields(writer.manifest, writer.path))
        writer.logger.error("container run failed: %s", reason)
        writer.finish("failed", error=str(reason))
        attempts.append_event(host.attempts_index, "finished", run_id, status="failed",
                              finished_at=writer.manifest["finished_at"], error=attempts.error_gist(str(reason)))
        status = "failed"
    if error is not None:
        log(f"bench: container run {run_id} failed: {error}")
        # Interrupted: the shell's code for death by that signal (the container is gone).
        return (128 + error.signum if isinstance(error, container_run.ContainerInterrupted) else 1), evidence_dir
    if result.exit_code != 0 or status != "completed":
        log(f"bench: container run {run_id} exited with {result.exit_code}, evidence status {status}")
        return 1, evidence_dir
    return 0, evidence_dir
