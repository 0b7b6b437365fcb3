"""Cheap checks of the machine before a suite's first heavy step, the model download.

A full-scale suite on a machine that cannot run it should not start a 35B-parameter
download first and fail hours later. Before the model identity job would fetch a Hub
snapshot (rules/model.smk, checked at DAG time in rules/common.smk) these checks run,
all of them, and their findings become one error listing everything that is missing
(one line each):

- GPUs: the suite's `gpus` NVIDIA devices through NVML (or, under the SLURM executor,
  a node whose GPU gres has that many, through `sinfo`), every GPU of its `gpu_sets`, and,
  when the suite names a `gpu_kind` (the comparison suite: H200), that kind for each of
  them (NVML's device name; SLURM's gres type where the cluster gives one);
- a Docker-API container engine at DOCKER_HOST, for `runtime: container` suites;
- the Hugging Face Hub reachable (the pinned revision's file list, with sizes);
- free disk under the HF_HOME for those files.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping

#: Seconds any one network check may take (the Hub, the container engine).
NETWORK_TIMEOUT_S = 10

_GRES_GPUS = re.compile(r"(?:^|,)gpu(?::(?P<kind>[^:,()]+))?:(?P<count>\d+)")


class NotReady(RuntimeError):
    """What a suite needs and this machine lacks, as one message."""


def gpu_problems(suite: Mapping[str, Any], executor: str) -> list[str]:
    """Missing GPUs for the suite's runs, as seen from where they will run."""
    needed = int(suite.get("gpus") or 0)
    if needed == 0:
        return []
    kind = str(suite.get("gpu_kind") or "")
    if executor == "slurm":
        return _slurm_gpu_problems(needed, kind)
    if executor not in ("local", "dryrun"):
        return []  # e.g. Kubernetes: the cluster, not this machine, has the GPUs; it is asked at submission
    from ..host.gpus import InventoryError, query_inventory

    try:
        inventory = query_inventory()
    except InventoryError as exc:
        return [f"no GPU: the suite needs {needed} NVIDIA GPU(s) and NVML answers none here ({exc})"]
    found = inventory.gpus
    if len(found) < needed:
        names = ", ".join(sorted({g.name for g in found})) or "none"
        return [f"too few GPUs: the suite needs {needed}, NVML lists {len(found)} ({names})"]
    listed = ", ".join(f"{g.index} {g.name}" for g in found)
    by_id = {str(g.index): g for g in found} | {g.uuid: g for g in found}
    wanted = [d.strip() for s in suite.get("gpu_sets") or [] for d in str(s).split(",")] \
        or [str(g.index) for g in found[:needed]]
    absent = sorted(set(wanted) - set(by_id))
    if absent:
        return [f"GPU(s) {', '.join(absent)} of the suite's gpu_sets are not on this machine (NVML lists {listed})"]
    other = sorted({f"{by_id[d].index} {by_id[d].name}" for d in wanted if not _is_kind(by_id[d].name, kind)})
    if other:
        return [f"wrong GPU kind: the suite's throughput contract is for {kind} GPUs; "
                f"{len(other)} of the {len(set(wanted))} it would use are not ({', '.join(other)})"]
    return []


def _is_kind(name: str, kind: str) -> bool:
    """Whether a device or gres name is of a kind ("H200" in "NVIDIA H200"; any name when none is asked)."""
    return kind.lower() in name.lower()


def _slurm_gpu_problems(needed: int, kind: str) -> list[str]:
    try:
        proc = subprocess.run(["sinfo", "--noheader", "--format=%G"], capture_output=True, text=True,
                              timeout=NETWORK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"no SLURM: `sinfo` cannot be run ({exc})"]
    if proc.returncode != 0:
        return [f"no SLURM: `sinfo` failed ({(proc.stderr or proc.stdout).strip()})"]
    gres = [(m["kind"], int(m["count"])) for line in proc.stdout.split() for m in _GRES_GPUS.finditer(line)]
    most = max((n for _, n in gres), default=0)
    if most < needed:
        return [f"no SLURM node with {needed} GPUs: the most GPU gres a node has (sinfo) is {most}"]
    # A gres without a type says nothing of the kind; the run's own NVML inventory records it.
    typed = [(k, n) for k, n in gres if k]
    if kind and typed and not any(n >= needed and _is_kind(k, kind) for k, n in typed):
        return [f"no SLURM node with {needed} {kind} GPUs: the typed GPU gres (sinfo) are "
                f"{', '.join(sorted({f'gpu:{k}:{n}' for k, n in typed}))}"]
    return []


def engine_problems(suite: Mapping[str, Any]) -> list[str]:
    if suite.get("runtime") != "container":
        return []
    from ..provenance.images import ImageError, engine_client

    try:
        engine_client(timeout=NETWORK_TIMEOUT_S).close()
    except ImageError as exc:
        return [f"no container engine: {exc}"]
    return []


def snapshot_problems(repo_id: str, revision: str, hf_home: Path | str) -> list[str]:
    """The Hub and the disk, for a snapshot that is not in HF_HOME yet."""
    from ..models.snapshots import hub_offline

    hub = Path(hf_home) / "hub"
    if hub_offline():
        return [f"offline (HF_HUB_OFFLINE=1) and {repo_id}@{revision} is not in {hub}: "
                "pass --config hf_cache=PATH naming an HF_HOME that holds it"]
    from huggingface_hub import HfApi

    try:
        info = HfApi().model_info(repo_id, revision=revision, files_metadata=True, timeout=NETWORK_TIMEOUT_S)
    except Exception as exc:  # any failure to get the file list is "not reachable", named
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return [f"no Hub: cannot reach the Hugging Face Hub for {repo_id}@{revision} ({first}): give this machine "
                "network access to it, or pass --config hf_cache=PATH naming an HF_HOME that holds the pinned revision"]
    needed = sum(s.size or 0 for s in info.siblings or [])
    existing = next(p for p in [hub, *hub.parents] if p.exists())
    free = shutil.disk_usage(existing).free
    if free < needed:
        return [f"not enough disk: {repo_id}@{revision} is {needed / 1e9:.1f} GB, {free / 1e9:.1f} GB free at {existing}"]
    return []


def check_before_download(suite_name: str, suite: Mapping[str, Any], model: Mapping[str, Any],
                          hf_home: Path | str, executor: str) -> None:
    """Raise NotReady naming everything missing before `model`'s snapshot is downloaded for a suite."""
    problems = gpu_problems(suite, executor) + engine_problems(suite)
    problems += snapshot_problems(model["repo_id"], model["revision"], hf_home)
    if problems:
        raise NotReady(f"suite {suite_name} cannot run on this machine, so {model['repo_id']} was not downloaded:\n"
                       + "\n".join(f"  - {p}" for p in problems))
