"""Host description: the software stack a run executed on (redaction: test_redaction.py)."""

from __future__ import annotations

import json

from rl_pipeline_bench import hostinfo
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
