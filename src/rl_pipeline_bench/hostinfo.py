"""Host description and secret redaction for manifests.

A manifest must say where a number came from without leaking credentials, so every
environment snapshot passes through `redacted_env` before it is written anywhere.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from importlib import metadata
from typing import Mapping

REDACTED = "<redacted>"

# Names that look like credentials: tokens, keys, passwords, secrets, auth material.
_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|SESSION_?KEY|_KEY$|^KEY$)",
    re.IGNORECASE,
)
# Values that embed credentials even under innocent names (user:pass@host URLs).
_URL_WITH_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@\s]+)@", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_value(value: str) -> str:
    return _URL_WITH_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", value)


def redacted_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Copy of the environment with credential-like variables replaced by a marker."""
    env = os.environ if env is None else env
    return {k: (REDACTED if is_secret_name(k) else redact_value(v)) for k, v in sorted(env.items())}


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """Remove the values of secret variables from free text (logs, commands)."""
    env = os.environ if env is None else env
    for k, v in env.items():
        if v and len(v) >= 6 and is_secret_name(k):
            text = text.replace(v, REDACTED)
    return redact_value(text)


_PACKAGES = ("torch", "transformers", "peft", "snakemake", "pandas", "pyarrow", "nvidia-ml-py",
             "openpipe-art", "skyrl", "vllm", "rl-pipeline-bench")


def package_versions(names=_PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def host_info() -> dict:
    """What machine and software a run executed on (no GPU probing: leases record GPUs)."""
    info = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
    }
    try:
        import torch

        info["torch_cuda"] = torch.version.cuda
        info["cuda_available"] = bool(torch.cuda.is_available())
    except Exception:  # torch missing or broken: record that, do not fail the run
        info["torch_cuda"] = None
        info["cuda_available"] = False
    return info
