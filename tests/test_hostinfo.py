"""Host description: the software stack a run executed on (redaction: test_redaction.py)."""

from __future__ import annotations

import json

from rl_pipeline_bench.host import hostinfo
from rl_pipeline_bench.backends import get


def test_host_info_names_the_software_stack(monkeypatch, tmp_path):
    (tmp_path / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.8.1"}}))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    info = hostinfo.host_info(packages=get("art").packages)
    for key in ("kernel", "python", "packages", "nvidia", "cuda_toolkit", "torch_cuda", "os"):
        assert key in info
    assert info["python"].count(".") == 2
    assert info["packages"]["torch"] and info["packages"]["rl-pipeline-bench"]
    # The backend's own packages are recorded (None where not installed), no other backend's.
    assert "openpipe-art" in info["packages"] and "skyrl" not in info["packages"]
    assert info["cuda_toolkit"] == {"cuda_home": str(tmp_path), "toolkit_version": "12.8.1"}
    nv = info["nvidia"]
    # Either NVML answered with a driver, or it says why it could not.
    assert (nv["driver_version"] is not None) != (nv["nvml_error"] is not None)
    json.dumps(info)  # a manifest must be able to hold it


def _venv_with(tmp_path, name: str, version: str) -> str:
    """A real venv whose site-packages holds one installed distribution's metadata (no code)."""
    import subprocess
    import sys

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return str(venv / "bin" / "python")


def test_art_runtime_packages_are_read_in_their_own_venvs(tmp_path, monkeypatch):
    """ART runs vLLM and Megatron-Core from venvs of their own: the manifest reads them there."""
    vllm_python = _venv_with(tmp_path / "vllm", "vllm", "0.25.1")
    runtime_bin = tmp_path / "vllm" / "venv" / "bin" / "art-vllm-runtime-server"
    runtime_bin.write_text("#!/bin/sh\n")
    monkeypatch.setenv("ART_VLLM_RUNTIME_BIN", str(runtime_bin))
    monkeypatch.setenv("ART_MEGATRON_RUNTIME_PYTHON", str(tmp_path / "missing" / "python"))
    art = get("art")
    info = hostinfo.host_info(art.packages, art.package_homes())
    homes = info["package_homes"]
    assert homes["vllm"] == {"python": vllm_python, "version": "0.25.1", "error": None}
    assert info["packages"]["vllm"] == "0.25.1"
    # Not found is said, never filled in from this environment.
    assert homes["megatron-core"]["version"] is None and info["packages"]["megatron-core"] is None
    assert homes["megatron-core"]["error"] == f"no interpreter at {tmp_path / 'missing' / 'python'}"
    assert "package_homes" not in hostinfo.host_info(get("skyrl").packages)  # SkyRL's live in its own venv
    json.dumps(info)
