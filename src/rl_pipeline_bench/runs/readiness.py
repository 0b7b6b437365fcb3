"""Whether this machine can run what a workflow is about to run, checked once, before its first job.

A suite that cannot run here should stop before anything starts, not at the first lease,
the image build or a 35B-parameter download hours later. Snakemake's `onstart` hook
(rules/readiness.smk) hands over what its planned jobs need; these checks run, all of
them, and their findings become one block: every problem on one line, its fix under it.
A dry run (`snakemake -n`) has no onstart and plans anywhere.

- GPUs, for jobs that take the `gpu` resource: the suite's `gpus` NVIDIA devices through
  NVML (or, under the SLURM executor, a node whose GPU gres has that many, through
  `sinfo`), every GPU of its `gpu_sets`, and, when the suite names a `gpu_kind` (the
  comparison suite: H200), that kind for each of them (NVML's device name; SLURM's gres
  type where the cluster gives one);
- a Docker-API container engine at DOCKER_HOST, for image builds and container runs;
- for a Hub model that is not in HF_HOME yet: the Hugging Face Hub reachable (the pinned
  revision's file list, with sizes) and free disk under the HF_HOME for those files.
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


class Problem(str):
    """One thing this machine lacks (the text), with what to do about it (`fix`)."""

    fix: str

    def __new__(cls, text: str, fix: str) -> "Problem":
        problem = super().__new__(cls, text)
        problem.fix = fix
        return problem


def _gpu_fix(needed: int, kind: str) -> str:
    return (f"run this suite on a machine with {needed} {kind or 'NVIDIA'} GPU(s) (`uv run bench gpus` lists "
            "this machine's), or pick one this machine can run: `--config suite=smoke` runs on the CPU")


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
        return [Problem(f"no GPU: the suite needs {needed} NVIDIA GPU(s) and NVML answers none here ({exc})",
                        _gpu_fix(needed, kind))]
    found = inventory.gpus
    if len(found) < needed:
        names = ", ".join(sorted({g.name for g in found})) or "none"
        return [Problem(f"too few GPUs: the suite needs {needed}, NVML lists {len(found)} ({names})",
                        _gpu_fix(needed, kind))]
    listed = ", ".join(f"{g.index} {g.name}" for g in found)
    by_id = {str(g.index): g for g in found} | {g.uuid: g for g in found}
    wanted = [d.strip() for s in suite.get("gpu_sets") or [] for d in str(s).split(",")] \
        or [str(g.index) for g in found[:needed]]
    absent = sorted(set(wanted) - set(by_id))
    if absent:
        return [Problem(f"GPU(s) {', '.join(absent)} of the suite's gpu_sets are not on this machine (NVML lists {listed})",
                        "name GPUs of this machine: `bench run --suite NAME --gpus SET`, or the suite's gpu_sets")]
    other = sorted({f"{by_id[d].index} {by_id[d].name}" for d in wanted if not _is_kind(by_id[d].name, kind)})
    if other:
        return [Problem(f"wrong GPU kind: the suite's throughput contract is for {kind} GPUs; "
                        f"{len(other)} of the {len(set(wanted))} it would use are not ({', '.join(other)})",
                        f"name {kind} GPUs of this machine (`bench run --suite NAME --gpus SET`), or run on one "
                        f"with {needed} of them")]
    return []


def _is_kind(name: str, kind: str) -> bool:
    """Whether a device or gres name is of a kind ("H200" in "NVIDIA H200"; any name when none is asked)."""
    return kind.lower() in name.lower()


_NO_SLURM_FIX = "run where SLURM's `sinfo` answers, or leave out --profile profiles/slurm"


def _slurm_fix(needed: int, kind: str) -> str:
    return (f"submit to a partition whose nodes have {needed} {kind or 'GPU'} GPU gres "
            "(RL_BENCH_SLURM_PARTITION; docs/cluster.md)")


def _slurm_gpu_problems(needed: int, kind: str) -> list[str]:
    try:
        proc = subprocess.run(["sinfo", "--noheader", "--format=%G"], capture_output=True, text=True,
                              timeout=NETWORK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [Problem(f"no SLURM: `sinfo` cannot be run ({exc})", _NO_SLURM_FIX)]
    if proc.returncode != 0:
        return [Problem(f"no SLURM: `sinfo` failed ({(proc.stderr or proc.stdout).strip()})", _NO_SLURM_FIX)]
    gres = [(m["kind"], int(m["count"])) for line in proc.stdout.split() for m in _GRES_GPUS.finditer(line)]
    most = max((n for _, n in gres), default=0)
    if most < needed:
        return [Problem(f"no SLURM node with {needed} GPUs: the most GPU gres a node has (sinfo) is {most}",
                        _slurm_fix(needed, kind))]
    # A gres without a type says nothing of the kind; the run's own NVML inventory records it.
    typed = [(k, n) for k, n in gres if k]
    if kind and typed and not any(n >= needed and _is_kind(k, kind) for k, n in typed):
        return [Problem(f"no SLURM node with {needed} {kind} GPUs: the typed GPU gres (sinfo) are "
                        f"{', '.join(sorted({f'gpu:{k}:{n}' for k, n in typed}))}", _slurm_fix(needed, kind))]
    return []


def engine_problems() -> list[str]:
    """A Docker-API engine at DOCKER_HOST (image builds, container runs)."""
    from ..provenance.images import ENGINE_FIX, EngineUnreachable, engine_client

    try:
        engine_client(timeout=NETWORK_TIMEOUT_S).close()
    except EngineUnreachable as exc:
        return [Problem(f"no container engine: {exc.reason}", ENGINE_FIX)]
    return []


def snapshot_problems(repo_id: str, revision: str, hf_home: Path | str) -> list[str]:
    """The Hub and the disk, for a snapshot that is not in HF_HOME yet."""
    from ..models.snapshots import hub_offline

    hub = Path(hf_home) / "hub"
    if hub_offline():
        return [Problem(f"offline (HF_HUB_OFFLINE=1) and {repo_id}@{revision} is not in {hub}",
                        "unset HF_HUB_OFFLINE to download it, or pass --config hf_cache=PATH naming an HF_HOME that "
                        "holds it")]
    from huggingface_hub import HfApi

    try:
        info = HfApi().model_info(repo_id, revision=revision, files_metadata=True, timeout=NETWORK_TIMEOUT_S)
    except Exception as exc:  # any failure to get the file list is "not reachable", named
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return [Problem(f"no Hub: cannot reach the Hugging Face Hub for {repo_id}@{revision} ({first})",
                        "give this machine network access to the Hub, or pass --config hf_cache=PATH naming an "
                        "HF_HOME that holds the pinned revision")]
    needed = sum(s.size or 0 for s in info.siblings or [])
    existing = next(p for p in [hub, *hub.parents] if p.exists())
    free = shutil.disk_usage(existing).free
    if free < needed:
        return [Problem(f"not enough disk: {repo_id}@{revision} is {needed / 1e9:.1f} GB, {free / 1e9:.1f} GB free at "
                        f"{existing}", "free that much there, or pass --config hf_cache=PATH on a disk with room")]
    return []


def workflow_problems(gpu_suites: list[Mapping[str, Any]], engine: bool, downloads: list[Mapping[str, Any]],
                      executor: str) -> list[Problem]:
    """Everything missing for the planned jobs: the GPUs of each suite whose jobs take GPUs, a container
    engine when an image is built or run, the Hub and disk for each model to download (repo_id,
    revision, hf_home). Each problem once, in that order."""
    problems: list[Problem] = []
    for suite in gpu_suites:
        problems += gpu_problems(suite, executor)
    if engine:
        problems += engine_problems()
    for model in downloads:
        problems += snapshot_problems(model["repo_id"], model["revision"], model["hf_home"])
    return list(dict.fromkeys(problems))


def not_ready(what: str, problems: list[Problem]) -> NotReady:
    """One block: what cannot run, each problem and under it its fix."""
    lines = [f"{what} cannot run on this machine; nothing was started:"]
    for p in problems:
        lines += [f"  - {p}", f"    fix: {p.fix}"]
    lines.append("(`snakemake -n ...` still shows what would run.)")
    return NotReady("\n".join(lines))
