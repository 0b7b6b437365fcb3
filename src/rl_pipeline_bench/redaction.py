"""What of the environment and of free text may be written down.

Two lines of defence, because a list of secret-looking names misses real secrets
(database passwords as PGPASSWORD, personal access tokens, webhook URLs under
innocent names, DSNs, connection strings):

1. The environment is recorded by allow-list (`RUN_ENV_PREFIXES`, `RUN_ENV_NAMES`, and
   each registered backend's `env_prefixes`): only variables that shape a run (CUDA, NCCL,
   Hugging Face, torch, threading, this project's RL_BENCH_*, the frameworks' own knobs). Anything else is never written,
   whatever its name or value.
2. Every value and every piece of free text that is written (allow-listed values,
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
#: Single variables that shape a run (distributed launch, hashing, library search).
RUN_ENV_NAMES = frozenset({
    "PYTHONHASHSEED", "LD_LIBRARY_PATH", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
    "LOCAL_RANK", "LOCAL_WORLD_SIZE",
})

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


def recorded_env(env: Mapping[str, str] | None = None, extra_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """The run-shaping part of the environment, as a manifest records it.

    extra_prefixes: the run's backend's own (`Backend.env_prefixes`), beside RUN_ENV_PREFIXES.

    Only allow-listed variables are kept; a secret-named one among them (HF_TOKEN)
    keeps its name with a marker, and every other value is scrubbed like free text.
    """
    env = os.environ if env is None else env
    return {
        k: REDACTED if is_secret_name(k) else redact_text(v, env)
        for k, v in sorted(env.items())
        if is_run_variable(k, extra_prefixes)
    }
