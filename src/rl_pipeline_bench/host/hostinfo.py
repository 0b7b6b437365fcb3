"""Host description for manifests: OS, kernel, driver, CUDA, Python and package versions.

What of the environment a manifest may hold is decided in `redaction`.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from typing import Mapping, Sequence
from ..records.jsonfile import JsonFileError, read_json

#: Recorded for every run; a backend adds its own (its descriptor's `packages`).
COMMON_PACKAGES = ("torch", "transformers", "peft", "snakemake", "pandas", "pyarrow", "numpy", "nvidia-ml-py",
                   "huggingface-hub", "safetensors", "tokenizers", "docker", "rl-pipeline-bench")


def package_versions(names: Sequence[str] = COMMON_PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for n in dict.fromkeys(names):
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


#: Seconds one other environment's interpreter may take to name a version.
HOME_TIMEOUT_S = 60


def home_versions(homes: Mapping[str, str | None]) -> dict[str, dict[str, str | None]]:
    """{distribution: {python, version, error}} read by each one's own interpreter.

    For distributions that live in another environment than the run's (ART runs vLLM and
    Megatron-Core from venvs of their own): their version there, not whatever copy (if
    any) the run's own environment holds.
    """
    out: dict[str, dict[str, str | None]] = {}
    for name, python in homes.items():
        entry: dict[str, str | None] = {"python": python, "version": None, "error": None}
        if not python or not os.access(python, os.X_OK):
            entry["error"] = f"no interpreter at {python}" if python else "its environment was not found"
        else:
            try:
                proc = subprocess.run([python, "-c", "import sys; from importlib.metadata import version; "
                                       "print(version(sys.argv[1]))", name],
                                      capture_output=True, text=True, timeout=HOME_TIMEOUT_S)
                if proc.returncode == 0:
                    entry["version"] = proc.stdout.strip()
                else:
                    entry["error"] = ((proc.stderr or proc.stdout).strip().splitlines() or ["failed"])[-1]
            except (OSError, subprocess.TimeoutExpired) as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"
        out[name] = entry
    return out


def os_release() -> str | None:
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME")
    except OSError:
        return None


def nvidia_driver() -> dict[str, str | int | None]:
    """Driver and CUDA driver API version through NVML; all None where there is no NVIDIA driver."""
    out: dict[str, str | int | None] = {"driver_version": None, "cuda_driver_version": None, "nvml_error": None}
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            drv = pynvml.nvmlSystemGetDriverVersion()
            out["driver_version"] = drv.decode() if isinstance(drv, bytes) else drv
            cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            out["cuda_driver_version"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # no driver / no library: record why, never fail a run over it
        out["nvml_error"] = f"{type(exc).__name__}: {exc}"
    return out


def cuda_toolkit() -> dict[str, str | None]:
    """The CUDA toolkit CUDA_HOME names (native runs compile against it), with its version file."""
    home = os.environ.get("CUDA_HOME")
    version = None
    if home:
        try:
            version = read_json(os.path.join(home, "version.json"), "CUDA version file").get("cuda", {}).get("version")
        except (JsonFileError, AttributeError):
            version = None
    return {"cuda_home": home, "toolkit_version": version}


def host_info(packages: Sequence[str] = (), homes: Mapping[str, str | None] | None = None) -> dict:
    """What machine and software a run executed on: OS, kernel, driver, CUDA, Python, packages.

    packages: the run's backend's own distributions, recorded beside COMMON_PACKAGES.
    homes: {distribution: interpreter} for those of them that live in another environment;
    `packages` then holds the version found there, and `package_homes` where and how.
    GPUs themselves are recorded by the lease (index, UUID, name); this is the host.
    """
    info = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "os": os_release(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "cpu_count": os.cpu_count(),
        # A distribution with a home of its own is read there only (below), never in this environment.
        "packages": package_versions([n for n in (*COMMON_PACKAGES, *packages) if n not in (homes or {})]),
        "nvidia": nvidia_driver(),
        "cuda_toolkit": cuda_toolkit(),
    }
    if homes:
        info["package_homes"] = home_versions(homes)
        info["packages"].update({name: e["version"] for name, e in info["package_homes"].items()})
    try:
        import torch

        info["torch_cuda"] = torch.version.cuda
        info["cuda_available"] = bool(torch.cuda.is_available())
    except Exception:  # torch missing or broken: record that, do not fail the run
        info["torch_cuda"] = None
        info["cuda_available"] = False
    return info
