"""The SLURM job this process runs in, read from the environment SLURM gives every job.

Two users: the run manifest records the job (id, node, allocation), and the lease
supervisor leases exactly the GPUs SLURM allocated, never others. SLURM sets
`SLURM_JOB_GPUS` in a batch job and `SLURM_STEP_GPUS` in a job step (the
Snakemake SLURM plugin runs every job through `srun`); both hold the node's global
GPU ids, which are NVML indices when the node's gres.conf lists GPUs in NVML order
(`AutoDetect=nvml` does). docs/cluster.md says what has been checked on a real SLURM.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

JOB_ENV = "SLURM_JOB_ID"
#: Where the allocated GPU ids come from, most specific first.
GPU_ENVS = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")


class SlurmAllocationError(ValueError):
    """The SLURM allocation cannot serve the request; the message names the job, the variable and the fix."""


@dataclass(frozen=True)
class SlurmJob:
    job_id: str
    step_id: str | None
    array_task_id: str | None
    cluster: str | None
    node: str | None
    nodelist: str | None
    partition: str | None
    account: str | None
    cpus_on_node: int | None
    gpus: tuple[int, ...]  # global GPU ids on this node, as SLURM allocated them
    gpu_source: str | None  # the variable the ids came from (None: no GPU allocated)

    def describe(self) -> str:
        where = f" on node {self.node}" if self.node else ""
        step = f" step {self.step_id}" if self.step_id is not None else ""
        return f"SLURM job {self.job_id}{step}{where}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpus"] = list(self.gpus)
        return d


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _gpu_ids(env: Mapping[str, str], job_id: str) -> tuple[tuple[int, ...], str | None]:
    for name in GPU_ENVS:
        raw = env.get(name)
        if raw is None or not raw.strip():
            continue
        ids = []
        for entry in raw.split(","):
            entry = entry.strip()
            if not re.fullmatch(r"[0-9]+", entry):  # str.isdigit() also takes '²', which int() refuses
                raise SlurmAllocationError(
                    f"SLURM job {job_id}: {name}={raw!r} is not a comma-separated list of GPU ids "
                    f"(entry {entry!r}); cannot tell which GPUs SLURM allocated"
                )
            ids.append(int(entry))
        if len(set(ids)) != len(ids):
            raise SlurmAllocationError(f"SLURM job {job_id}: {name}={raw!r} names a GPU more than once")
        return tuple(ids), name
    return (), None


def current_job(env: Mapping[str, str] | None = None) -> SlurmJob | None:
    """The SLURM job of this process, or None outside SLURM (no SLURM_JOB_ID)."""
    env = os.environ if env is None else env
    job_id = env.get(JOB_ENV) or env.get("SLURM_JOBID")
    if not job_id:
        return None
    gpus, source = _gpu_ids(env, job_id)
    return SlurmJob(
        job_id=job_id,
        step_id=env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID"),
        array_task_id=env.get("SLURM_ARRAY_TASK_ID"),
        cluster=env.get("SLURM_CLUSTER_NAME"),
        node=env.get("SLURMD_NODENAME"),
        nodelist=env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"),
        partition=env.get("SLURM_JOB_PARTITION"),
        account=env.get("SLURM_JOB_ACCOUNT"),
        cpus_on_node=_int_or_none(env.get("SLURM_CPUS_ON_NODE")),
        gpus=gpus,
        gpu_source=source,
    )


def unverified_reason(job: SlurmJob, timeout_s: float = 10.0) -> str | None:
    """Why the environment's SLURM job cannot be trusted (None: `scontrol` knows it as a running job).

    Variables alone prove nothing (a stray `SLURM_JOB_ID` in a shell, a copied environment);
    the controller does.
    """
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return "scontrol is not installed, so the job cannot be confirmed"
    try:
        proc = subprocess.run([scontrol, "show", "job", "--oneliner", job.job_id], capture_output=True,
                              text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`scontrol show job {job.job_id}` did not answer ({exc})"
    if proc.returncode != 0:
        return f"`scontrol show job {job.job_id}` does not know it ({(proc.stderr or proc.stdout).strip()})"
    fields = dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", proc.stdout))
    if fields.get("JobState") not in ("RUNNING", "COMPLETING"):
        return f"`scontrol show job {job.job_id}` reports it {fields.get('JobState') or 'in no state'}, not running"
    return None


def allocated_gpu_spec(job: SlurmJob, count: int) -> str:
    """The lease SPEC for exactly the GPUs SLURM allocated to `job`; refuses any other count.

    A job with fewer GPUs than the run needs is refused before any GPU work; one with
    more is refused too, because the suite's topology is exact and the supervisor
    never picks a subset on its own.
    """
    if not job.gpus:
        raise SlurmAllocationError(
            f"{job.describe()} has no GPU allocated ({' and '.join(GPU_ENVS)} unset) but the run needs {count}; "
            f"submit it with --gpus={count} (the SLURM profile does this from the rule's `gpu` resource)"
        )
    if len(job.gpus) != count:
        kind = "fewer" if len(job.gpus) < count else "more"
        ids = ",".join(map(str, job.gpus))
        raise SlurmAllocationError(
            f"{job.describe()} was allocated {len(job.gpus)} GPU(s) ({job.gpu_source}={ids}), {kind} than the "
            f"{count} the run needs; resubmit with --gpus={count} (check `gpu` in --set-resources or the profile)"
        )
    return ",".join(map(str, job.gpus))
