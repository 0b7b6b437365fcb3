"""Host description and secret redaction: planted credentials never survive into a manifest or log."""

from __future__ import annotations

import json

from rl_pipeline_bench import hostinfo
from rl_pipeline_bench.backends import get
from rl_pipeline_bench.hostinfo import REDACTED

PLANTED = {
    "HF_TOKEN": "hf_plantedTOKENvalue123",
    "WANDB_API_KEY": "wandb-planted-key-456",
    "FOO_SECRET_BAR": "planted-secret-789",
    "DB_PASSWORD": "hunter2hunter2",
    "PIP_INDEX_URL": "https://alice:s3cr3t-pw@pypi.example.org/simple",
    "RUN_CMD": "train --token hf_plantedTOKENvalue123 --fast",
    "HOME": "/root",
}
SECRET_STRINGS = ("hf_plantedTOKENvalue123", "wandb-planted-key-456", "planted-secret-789", "hunter2hunter2", "s3cr3t-pw")


def test_redacted_env_removes_every_planted_secret():
    red = hostinfo.redacted_env(PLANTED)
    for name in ("HF_TOKEN", "WANDB_API_KEY", "FOO_SECRET_BAR", "DB_PASSWORD"):
        assert red[name] == REDACTED
    assert red["PIP_INDEX_URL"] == f"https://alice:{REDACTED}@pypi.example.org/simple"
    assert red["RUN_CMD"] == f"train --token {REDACTED} --fast"
    assert red["HOME"] == "/root"  # innocent values survive
    dumped = json.dumps(red)
    for secret in SECRET_STRINGS:
        assert secret not in dumped


def test_redact_text_for_logs():
    line = "login hf_plantedTOKENvalue123 then fetch https://bob:s3cr3t-pw@host/x with planted-secret-789"
    out = hostinfo.redact_text(line, PLANTED)
    for secret in SECRET_STRINGS:
        assert secret not in out
    assert "https://bob:" in out and out.count(REDACTED) == 3


def test_secret_name_patterns():
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "FOO_SECRET_BAR", "AWS_SECRET_ACCESS_KEY",
                 "GITHUB_PAT_PASSWORD", "OPENAI_APIKEY", "SSH_PRIVATE_KEY"):
        assert hostinfo.is_secret_name(name), name
    for name in ("PATH", "HOME", "CUDA_VISIBLE_DEVICES", "HF_HOME", "KEYBOARD_LAYOUT"):
        assert not hostinfo.is_secret_name(name), name


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
