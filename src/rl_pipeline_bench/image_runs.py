"""`runtime: container`: the host's `bench run` runs the same benchmark inside the backend's image.

The host keeps the lease (it runs under `bench lease run`) and decides the run id. It
checks that the image is still the one the preflight proved, then starts `bench run`
inside it (rl_pipeline_bench.container_run) with only these mounted, at their host
paths: the evidence root (read-write), the model cache and the run's input and
provenance records (read-only). The leased GPUs go in as device requests, the image's
baked hashes as environment. Inside, `bench run` writes the evidence and records the
container and its own recomputation of the baked hashes in the manifest
(runner.container_identity). The host writes run.json only when the container exited
0 and its evidence says completed; a container that died before writing evidence
still leaves a failed evidence directory.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import container_run, images, provenance
from .container_run import Mount, bind


def inside_container(env: Mapping[str, str] | None = None) -> bool:
    """True in a container that run_container started (its control record is named)."""
    env = os.environ if env is None else env
    return bool(env.get(container_run.CONTROL_ENV))


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
                          lease_record: str | None = None) -> dict[str, str]:
    """What the in-container run needs besides the image's own environment."""
    env = {
        provenance.BAKED_RECIPE_ENV: labels.get(images.LABEL_RECIPE, ""),
        provenance.BAKED_SOURCE_ENV: labels.get(images.LABEL_SOURCE, ""),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    cache = model_cache(model)
    if model.get("hf_home") and cache is not None:
        env["HF_HOME"] = str(cache)
    if lease_record:
        from .leases import RECORD_ENV

        env[RECORD_ENV] = str(Path(lease_record).resolve())
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
    from .leases import RECORD_ENV, current_lease_gpus

    checked = images.preflight(backend, record=image_record, client=client, verify_contents=False)
    labels = {images.LABEL_RECIPE: checked["recipe_sha256"], images.LABEL_SOURCE: checked["source_sha256"]}
    lease_record = os.environ.get(RECORD_ENV) or None
    gpus = current_lease_gpus() or []
    mounts = run_mounts(evidence_root, model, inputs, lease_record, writable)
    return container_run.run_container(
        checked["image_id"], ["bench", *inner_args],
        mounts=mounts, environment=container_environment(labels, model, lease_record),
        gpu_uuids=[g["uuid"] for g in gpus], name=container_name(run_id),
        labels={container_run.LABEL_RUN: run_id, images.LABEL_BACKEND: backend},
        network_mode=network_mode, user=f"{os.getuid()}:{os.getgid()}", client=client, log=log,
        extra_host_config=host_config,
    )


def evidence_status(evidence_dir: Path) -> str | None:
    """The manifest's status of an evidence directory (None if there is no readable manifest)."""
    try:
        return json.loads((Path(evidence_dir) / "manifest.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def container_identity(backend: str, root: Path | str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
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
