"""What of the environment and of free text may be written down.

Three lines of defence, because a list of secret-looking names misses real secrets
(database passwords as PGPASSWORD, personal access tokens, webhook URLs under
innocent names, DSNs, connection strings, a credential under RL_BENCH_ or SLURM_):

1. The environment is recorded by allow-list (`RUN_ENV_PREFIXES`, `RUN_ENV_NAMES`, and
   the run's backend's `env_prefixes`): only variables of the families that shape a run
   (CUDA, NCCL, Hugging Face, torch, threading, this project's RL_BENCH_*, SLURM, the
   frameworks' own knobs). Anything else is never written, whatever its name or value.
2. Of those, only the variables known to shape a run (`RUN_SHAPING_VALUES`, each with
   why, plus those a backend adds through `register_run_variables`: its descriptor's
   `run_variables`) have their VALUES
   recorded; every other allowed name is recorded as `NOT_RECORDED`, so a variable
   nobody listed (a credential under RL_BENCH_, a free-text SLURM variable) keeps its
   value out of the record whatever its name looks like.
3. Every value and every piece of free text that is written (recorded values,
   commands, log records, error messages) is scrubbed: the values of secret-named
   variables of this process, credentials inside URLs, secret query parameters,
   key=value and --flag value secrets (connection strings, command lines),
   authorization headers, webhook paths and tokens of well-known shapes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

REDACTED = "<redacted>"

#: Prefixes of the variables that shape any run and are recorded in manifests; a backend
#: adds its framework's own on its descriptor (`Backend.env_prefixes`), which the run passes
#: to `recorded_env` as `extra_prefixes`.
RUN_ENV_PREFIXES = (
    "CUDA_", "CUBLAS_", "CUDNN_", "NVIDIA_", "NCCL_", "NVSHMEM_", "GLOO_", "TORCH", "PYTORCH_",
    "HF_", "TRANSFORMERS_", "TOKENIZERS_", "SAFETENSORS_",
    "OMP_", "MKL_", "OPENBLAS_", "NUMEXPR_", "KMP_",
    "RL_BENCH_", "SLURM_", "MUJOCO_",
)
#: Single variables outside those prefixes that shape a run (distributed launch, hashing, library search).
RUN_ENV_NAMES = frozenset({
    "PYTHONHASHSEED", "LD_LIBRARY_PATH", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
    "LOCAL_RANK", "LOCAL_WORLD_SIZE",
})

#: Allowed variables whose values are recorded: each is known to shape a run (name -> why).
#: Anything else under an allowed prefix is recorded by name only (its value is NOT_RECORDED).
RUN_SHAPING_VALUES: dict[str, str] = {
    # distributed launch and hashing
    "PYTHONHASHSEED": "fixes Python's str hashing, so set/dict order of a run",
    "LD_LIBRARY_PATH": "which CUDA/NCCL shared libraries the process loads",
    "MASTER_ADDR": "torch.distributed rendezvous host",
    "MASTER_PORT": "torch.distributed rendezvous port",
    "WORLD_SIZE": "number of distributed ranks",
    "RANK": "this process's distributed rank",
    "LOCAL_RANK": "this process's rank on its node (its GPU)",
    "LOCAL_WORLD_SIZE": "ranks on this node",
    # CUDA and NVIDIA runtime
    "CUDA_VISIBLE_DEVICES": "which GPUs the run sees (the lease sets it to UUIDs)",
    "CUDA_DEVICE_ORDER": "how CUDA numbers the visible GPUs",
    "CUDA_LAUNCH_BLOCKING": "synchronous kernel launches (slows every step)",
    "CUDA_MODULE_LOADING": "lazy or eager loading of CUDA kernels (startup time, memory)",
    "CUDA_DEVICE_MAX_CONNECTIONS": "hardware work queues per GPU (compute/communication overlap)",
    "CUDA_HOME": "which CUDA toolkit builds and JIT-compiles kernels",
    "CUDA_CACHE_PATH": "where JIT-compiled kernels are cached (cold or warm start)",
    "CUBLAS_WORKSPACE_CONFIG": "cuBLAS workspace size, needed for deterministic GEMMs",
    "NVIDIA_VISIBLE_DEVICES": "which GPUs the container runtime exposes",
    "NVIDIA_DRIVER_CAPABILITIES": "which driver libraries the container runtime mounts",
    # collective communication (the all-reduce probe records these too)
    "NCCL_DEBUG": "NCCL logging level (logging costs time)",
    "NCCL_DEBUG_SUBSYS": "which NCCL subsystems log",
    "NCCL_ALGO": "forces NCCL's collective algorithm",
    "NCCL_PROTO": "forces NCCL's protocol",
    "NCCL_NVLS_ENABLE": "NVLink SHARP collectives on or off",
    "NCCL_CUMEM_ENABLE": "NCCL's cuMem allocator on or off",
    "NCCL_P2P_DISABLE": "turns off peer-to-peer GPU transfers",
    "NCCL_P2P_LEVEL": "topology distance up to which NCCL uses peer-to-peer",
    "NCCL_SHM_DISABLE": "turns off shared-memory transport",
    "NCCL_IB_DISABLE": "turns off InfiniBand transport",
    "NCCL_IB_HCA": "which InfiniBand adapters NCCL uses",
    "NCCL_IB_GID_INDEX": "RoCE GID index NCCL uses",
    "NCCL_NET_GDR_LEVEL": "when NCCL uses GPUDirect RDMA",
    "NCCL_SOCKET_IFNAME": "which network interface NCCL's sockets use",
    "NCCL_MIN_NCHANNELS": "lower bound on NCCL channels (bandwidth)",
    "NCCL_MAX_NCHANNELS": "upper bound on NCCL channels (bandwidth)",
    "NCCL_BUFFSIZE": "NCCL's per-channel buffer size",
    "NVSHMEM_DISABLE_NVLS": "NVLink SHARP in NVSHMEM on or off",
    "GLOO_SOCKET_IFNAME": "which network interface Gloo uses",
    # torch
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "how torch reacts to a failed collective",
    "TORCH_NCCL_BLOCKING_WAIT": "blocking waits on collectives",
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "torch's NCCL memory reuse",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "multicast in torch's symmetric memory on or off",
    "TORCH_DISTRIBUTED_DEBUG": "extra collective checks (slower)",
    "TORCH_CUDA_ARCH_LIST": "GPU architectures kernels are compiled for",
    "TORCH_HOME": "where torch caches downloads and kernels",
    "TORCHINDUCTOR_CACHE_DIR": "where compiled graphs are cached (cold or warm start)",
    "PYTORCH_CUDA_ALLOC_CONF": "the CUDA caching allocator's settings (memory, fragmentation)",
    "PYTORCH_ALLOC_CONF": "the caching allocator's settings (newer name)",
    # Hugging Face (a URL among them is still scrubbed)
    "HF_HOME": "where models are read from (the pinned snapshot's cache)",
    "HF_HUB_CACHE": "where hub snapshots are read from",
    "HF_HUB_OFFLINE": "whether the hub may be contacted at all",
    "HF_ENDPOINT": "which hub serves the model",
    "HF_DATASETS_OFFLINE": "whether datasets may be downloaded",
    "TRANSFORMERS_OFFLINE": "whether transformers may download",
    "TRANSFORMERS_CACHE": "where transformers reads models (older name)",
    "SAFETENSORS_FAST_GPU": "direct-to-GPU weight loading",
    # threading
    "OMP_NUM_THREADS": "CPU threads per process",
    "OMP_PROC_BIND": "thread pinning",
    "OMP_PLACES": "where threads may run",
    "MKL_NUM_THREADS": "MKL threads",
    "MKL_THREADING_LAYER": "MKL's threading runtime",
    "OPENBLAS_NUM_THREADS": "OpenBLAS threads",
    "NUMEXPR_NUM_THREADS": "numexpr threads",
    "NUMEXPR_MAX_THREADS": "numexpr's thread cap",
    "KMP_AFFINITY": "Intel OpenMP thread pinning",
    "KMP_BLOCKTIME": "how long Intel OpenMP threads spin",
    # simulators
    "MUJOCO_GL": "MuJoCo's rendering backend (osmesa on CPU, egl on GPU)",
    # this project
    "RL_BENCH_RUNTIME": "native or container: where the run executes",
    "RL_BENCH_BACKEND": "the backend an image or prefix was built for",
    "RL_BENCH_ROOT": "the source tree the run executes",
    "RL_BENCH_ENV_ROOT": "the native prefix whose pinned environment runs",
    "RL_BENCH_SOURCE_SHA256": "the benchmark source an image carries",
    "RL_BENCH_RECIPE_SHA256": "the recipe an image was built from",
    "RL_BENCH_IMAGE_SOURCE_SHA256": "the source baked into the image",
    "RL_BENCH_IMAGE_RECIPE_SHA256": "the recipe baked into the image",
    "RL_BENCH_BASE_IMAGE": "the image's base",
    "RL_BENCH_PYTHON_VERSION": "the pinned Python",
    "RL_BENCH_CUDA_VERSION": "the pinned CUDA",
    "RL_BENCH_UV_VERSION": "the pinned uv",
    "RL_BENCH_GPU_INVENTORY": "a GPU inventory that replaces NVML (fixture hosts)",
    "RL_BENCH_LEASE_RECORD": "the lease the run holds",
    "RL_BENCH_LOCK_DIR": "where lease locks live",
    "RL_BENCH_SUPERVISOR": "the host process that supervises a container run",
    "RL_BENCH_REQUIRE_FRAMEWORKS": "whether missing frameworks fail instead of skip",
    "RL_BENCH_NATIVE_PYTHON": "the interpreter of a native prefix",
    "RL_BENCH_REQUESTED_IMAGE": "the image a pod was asked to run",
    "RL_BENCH_POD_NAME": "the Kubernetes pod that ran",
    "RL_BENCH_POD_UID": "the Kubernetes pod that ran (its uid)",
    "RL_BENCH_NODE_NAME": "the Kubernetes node that ran",
    # a framework's own variables are on its descriptor (Backend.run_variables)
    # SLURM: the allocation, never free text (job name, comment) nor credentials
    "SLURM_JOB_ID": "the SLURM job that ran",
    "SLURM_JOBID": "the SLURM job that ran (older name)",
    "SLURM_STEP_ID": "the job step",
    "SLURM_STEPID": "the job step (older name)",
    "SLURM_ARRAY_TASK_ID": "the array task",
    "SLURM_JOB_GPUS": "the GPUs SLURM allocated",
    "SLURM_STEP_GPUS": "the GPUs of the step",
    "SLURM_GPUS_ON_NODE": "how many GPUs the node gave",
    "SLURM_CPUS_ON_NODE": "how many CPUs the node gave",
    "SLURM_CPUS_PER_TASK": "CPUs per task",
    "SLURM_MEM_PER_NODE": "memory per node",
    "SLURM_NTASKS": "tasks of the job",
    "SLURM_NNODES": "nodes of the job",
    "SLURM_PROCID": "this task's rank",
    "SLURM_LOCALID": "this task's rank on its node",
    "SLURM_JOB_NODELIST": "the nodes that ran",
    "SLURM_NODELIST": "the nodes that ran (older name)",
    "SLURM_JOB_PARTITION": "the partition that ran",
    "SLURM_JOB_ACCOUNT": "the account the job was charged to (its share, its limits)",
    "SLURM_CLUSTER_NAME": "the cluster that ran",
}
#: What a manifest shows for an allowed variable whose value is not known to be safe to record.
NOT_RECORDED = "<not recorded>"
#: Run-shaping variables added through register_run_variables (name -> why).
_added_values: dict[str, str] = {}

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|(^|_)PASS($|_)|_PWD$|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|(^|_)CRED($|_)|AUTH"
    r"|SESSION|COOKIE|SIGNATURE|(^|_)SIG($|_)|(^|_)SAS($|_)|DSN|CONNECTION_?STRING|CONN_?STR|WEBHOOK"
    r"|(^|_)PAT($|_)|(^|_)KEY($|_)|SALT",
    re.IGNORECASE,
)
#: Key names whose value is a secret in key=value text (connection strings, --set, env dumps).
_SECRET_KEY = (
    r"(?:token|secret|password|passwd|pwd|apikey|api_key|api-key|accountkey|sharedaccesskey"
    r"|sharedaccesssignature|accesskey|access_key|access-key|credentials?|private_?key|auth|cookie"
    r"|signature|dsn|webhook|(?<![a-z])sig|(?<![a-z])pass|(?<![a-z])pat|(?<![a-z])key)"
)


def _url_userinfo(m: re.Match) -> str:
    user, sep, _ = m["userinfo"].partition(":")
    return f"{m['scheme']}{user}:{REDACTED}@" if sep else f"{m['scheme']}{REDACTED}@"


#: (pattern, replacement) applied in order to every written text.
_SHAPES: tuple[tuple[re.Pattern, object], ...] = (
    # scheme://user:password@host, scheme://:password@host, scheme://token@host (DSNs)
    (re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<userinfo>[^/?#@\s\"'<>]+)@", re.I), _url_userinfo),
    # webhook URLs: the secret is the path
    (re.compile(r"(hooks\.slack\.com/services/|/api/webhooks/|/webhook[a-z0-9]*/|/hooks/)[^\s?#\"'<>]+", re.I),
     rf"\1{REDACTED}"),
    # Authorization: Bearer X / token X / Basic X, and bare "Bearer X"
    (re.compile(r"(authorization\s*[:=]\s*(?:(?:bearer|basic|token|digest|negotiate)\s+)?)"
                r"(?!(?:bearer|basic|token|digest|negotiate)\s)[^\s\"',;<>]+", re.I), rf"\1{REDACTED}"),
    (re.compile(r"(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}", re.I), rf"\1{REDACTED}"),
    # key=value (connection strings, query parameters, --set KEY=VALUE, NAME=VALUE cmd)
    (re.compile(rf"((?<![A-Za-z0-9])[A-Za-z0-9_.-]*{_SECRET_KEY}\s*=\s*)[^\s;&,\"'<>]+", re.I), rf"\1{REDACTED}"),
    # --token VALUE, --password VALUE
    (re.compile(r"(--?[A-Za-z0-9_-]*(?:token|secret|password|passwd|api-key|apikey|api_key|access-key|credentials?)\s+)"
                r"(?!-)[^\s\"'<>]+", re.I), rf"\1{REDACTED}"),
    # tokens of well-known shapes
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
                r"|hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|npm_[A-Za-z0-9]{30,}"
                r"|pypi-[A-Za-z0-9_-]{30,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}"
                r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"), REDACTED),
)

#: Shorter values of secret-named variables are not searched for in text ("1", "true").
_MIN_SECRET_LEN = 6
_env_cache: dict[tuple, re.Pattern | None] = {}


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def is_run_variable(name: str, extra_prefixes: tuple[str, ...] = ()) -> bool:
    """Whether a variable shapes a run: the common allow-list, or a prefix the run's backend declares."""
    return name in RUN_ENV_NAMES or name.startswith(RUN_ENV_PREFIXES + tuple(extra_prefixes))


def redact_value(value: str) -> str:
    """Scrub credentials that have a recognisable shape (the second line of defence)."""
    for pattern, replacement in _SHAPES:
        value = pattern.sub(replacement, value)
    return value


def _secret_values(env: Mapping[str, str]) -> re.Pattern | None:
    """One pattern matching every secret-named variable's value, longest first (cached per environment)."""
    key = tuple(env.items())
    if key not in _env_cache:
        values = sorted({v for k, v in key if v and len(v) >= _MIN_SECRET_LEN and is_secret_name(k)}, key=len, reverse=True)
        if len(_env_cache) > 16:
            _env_cache.clear()
        _env_cache[key] = re.compile("|".join(map(re.escape, values))) if values else None
    return _env_cache[key]


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """Remove secret-named variables' values and credential-shaped strings from free text."""
    pattern = _secret_values(os.environ if env is None else env)
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    return redact_value(text)


def register_run_variables(names: Mapping[str, str], prefixes: tuple[str, ...] = ()) -> None:
    """The hook for a backend descriptor: add run-shaping variables it reads (name -> why).

    Each name must already be allowed (under `RUN_ENV_PREFIXES`, in `RUN_ENV_NAMES`, or under
    the backend's own `prefixes`) and not secret-named; from then on its value is recorded
    (scrubbed), not only its name.
    """
    for name, why in names.items():
        if not is_run_variable(name, prefixes):
            raise ValueError(f"{name} is not under an allowed prefix ({', '.join(RUN_ENV_PREFIXES + tuple(prefixes))})")
        if is_secret_name(name):
            raise ValueError(f"{name} has a secret's name; its value is never recorded")
        if not str(why).strip():
            raise ValueError(f"{name}: say why it shapes a run")
        _added_values[name] = str(why)


def records_value(name: str) -> bool:
    """Whether a manifest records this variable's value (not only its name)."""
    return (name in RUN_SHAPING_VALUES or name in _added_values) and not is_secret_name(name)


def recorded_env(env: Mapping[str, str] | None = None, extra_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """The run-shaping part of the environment, as a manifest records it.

    extra_prefixes: the run's backend's own (`Backend.env_prefixes`), beside RUN_ENV_PREFIXES.

    Only allow-listed variables are kept. A known run-shaping one keeps its value,
    scrubbed like free text; a secret-named one (HF_TOKEN) keeps its name with
    `REDACTED`; any other keeps its name with `NOT_RECORDED`.
    """
    env = os.environ if env is None else env
    return {
        k: REDACTED if is_secret_name(k) else redact_text(v, env) if records_value(k) else NOT_RECORDED
        for k, v in sorted(env.items())
        if is_run_variable(k, extra_prefixes)
    }
