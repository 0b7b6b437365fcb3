"""Secrets: the environment is recorded by allow-list; values and free text are scrubbed as a second line."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time

import pytest

from planted_secrets import MARK, PLANTED_ENV, SHAPELESS

from rl_pipeline_bench.records import redaction
from rl_pipeline_bench.paths import ROOT
from rl_pipeline_bench.records.redaction import REDACTED, recorded_env, redact_text

def test_env_is_recorded_by_allow_list():
    rec = recorded_env(PLANTED_ENV)
    assert MARK not in json.dumps(rec), rec
    assert rec["CUDA_VISIBLE_DEVICES"] == "GPU-0000" and rec["OMP_NUM_THREADS"] == "2"
    assert rec["TORCH_HOME"] == "/cache/torch" and rec["HF_HOME"] == "/cache/hf" and rec["NCCL_IB_HCA"] == "mlx5_0"
    assert rec["HF_TOKEN"] == REDACTED  # allow-listed prefix, secret name
    # allowed prefixes, but not known to shape a run: the name is kept, the value is not
    for name in ("HF_MIRROR_URL", "RL_BENCH_TRACKING_URI", "RL_BENCH_DB_LOGIN", "SLURM_JOB_COMMENT"):
        assert rec[name] == redaction.NOT_RECORDED, name
    for dropped in ("PGPASSWORD", "UNRELATED_SETTING", "CACHE_URL", "HOME", "PATH", "SESSION_COOKIE"):
        assert dropped not in rec


def _random_name(prefix: str) -> str:
    return prefix + secrets.token_hex(6).upper() + "_" + secrets.choice(["URL", "LOGIN", "NOTE", "CONFIG", "X"])


@pytest.mark.parametrize("prefix", redaction.RUN_ENV_PREFIXES)
def test_unknown_names_under_every_allowed_prefix_keep_their_values_out(prefix):
    """A credential under an allowed prefix with an innocent name (RL_BENCH_, SLURM_, VLLM_, ...):
    nothing in its name or value says secret, so only "not a known run-shaping variable" keeps it out."""
    env = {_random_name(prefix): f"{MARK}{secrets.token_hex(8)}" for _ in range(5)}
    env[_random_name(prefix)] = f"free text {MARK} with spaces"  # a free-text SLURM variable, say
    env["OMP_NUM_THREADS"] = "3"
    rec = recorded_env(env)
    assert MARK not in json.dumps(rec), rec
    assert set(rec) == set(env)  # the names are recorded ...
    assert {rec[k] for k in env if k != "OMP_NUM_THREADS"} <= {redaction.NOT_RECORDED, REDACTED}  # ... not the values
    assert rec["OMP_NUM_THREADS"] == "3"


def test_every_recorded_value_is_a_listed_allowed_name_with_a_reason():
    for name, why in redaction.RUN_SHAPING_VALUES.items():
        assert redaction.is_run_variable(name) and not redaction.is_secret_name(name), name
        assert why.strip() and "\n" not in why, name
    assert redaction.RUN_ENV_NAMES <= set(redaction.RUN_SHAPING_VALUES)  # a single allowed name is there for its value


def test_a_recorded_value_is_still_scrubbed():
    rec = recorded_env({"HF_ENDPOINT": f"https://mirror:{MARK}Endpoint0040@hf-mirror.internal",
                        "SLURM_JOB_PARTITION": "gpu", "SLURM_JOB_NAME": f"{MARK} my experiment"})
    assert rec == {"HF_ENDPOINT": f"https://mirror:{REDACTED}@hf-mirror.internal", "SLURM_JOB_PARTITION": "gpu",
                   "SLURM_JOB_NAME": redaction.NOT_RECORDED}


def test_a_backend_can_add_the_variables_it_reads(monkeypatch):
    monkeypatch.setattr(redaction, "_added_values", {})
    name = _random_name("VLLM_")
    prefixes = ("VLLM_", "ART_")  # a backend's own (Backend.env_prefixes)
    assert recorded_env({name: "flash"}, prefixes) == {name: redaction.NOT_RECORDED}
    redaction.register_run_variables({name: "which attention kernels the inference engine uses"}, prefixes)
    assert recorded_env({name: "flash"}, prefixes) == {name: "flash"}
    for bad in ({"PGPASSWORD": "x"}, {"VLLM_API_KEY": "x"}, {_random_name("ART_"): " "}):
        with pytest.raises(ValueError):
            redaction.register_run_variables(bad, prefixes)
    with pytest.raises(ValueError, match="not under an allowed prefix"):
        redaction.register_run_variables({name: "why"})  # without the backend's prefixes


# SHAPELESS values are left out: in free text nothing tells them from ordinary data, so only
# what the manifest records keeps them out (the pipeline test checks they are nowhere).
@pytest.mark.parametrize("name", sorted(k for k, v in PLANTED_ENV.items() if MARK in v and k not in SHAPELESS))
def test_every_planted_value_is_scrubbed_from_free_text(name):
    value = PLANTED_ENV[name]
    # a log line quoting the value, with the environment it came from known ...
    assert MARK not in redact_text(f"connecting with {value} now", PLANTED_ENV)
    # ... and a command line, with the environment unknown: name or shape alone must suffice
    out = redact_text(f"{name}={value} ./job", {})
    assert MARK not in out and out.endswith(" ./job"), out


@pytest.mark.parametrize("text,kept", [
    ("bench run --config hf_cache=ghp_Pl4ntedSetToken000000000000000019 --trial 1", "bench run --config hf_cache="),
    ("bench run --config api_token=Pl4ntedSetToken0020 --trial 1", "--config api_token=<redacted> --trial 1"),
    ("train --token Pl4ntedFlagToken0021 --fast", "train --token <redacted> --fast"),
    ("train --password=Pl4ntedFlagPass0022", "train --password=<redacted>"),
    ("curl -H 'Authorization: token Pl4ntedGhHeader0023' x", "curl -H 'Authorization: "),
    ("Server=db;Database=x;User Id=sa;Password=Pl4ntedSqlPass0024;", "Server=db;Database=x;User Id=sa;Password=<redacted>;"),
    ("Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=Pl4ntedSasKey0025=",
     "SharedAccessKeyName=root;SharedAccessKey=<redacted>"),
    ("https://acct.blob.core.windows.net/c/b?sv=2022&sig=Pl4ntedSasSig0026%3D&se=2030", "?sv=2022&sig=<redacted>&se=2030"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJQbDRudGVkIn0.Pl4ntedJwtSignature0027", "jwt <redacted>"),
    ("AWS key AKIAPL4NTEDKEY000028 in use", "AWS key <redacted> in use"),
    ("ftp://anonymous:Pl4ntedFtp0029@files.example/x", "ftp://anonymous:<redacted>@files.example/x"),
    ("https://discord.com/api/webhooks/123/Pl4ntedDiscord0030", "https://discord.com/api/webhooks/<redacted>"),
])
def test_shapes_of_secrets_in_free_text(text, kept):
    out = redact_text(text, {})
    assert MARK not in out and MARK.upper() not in out, out
    assert kept in out, out


@pytest.mark.parametrize("line", [
    "update 16 accepted_trajectories=4 assistant_tokens=1234 completion_tokens=512",
    "--max-tokens 4096 --tokens-per-call 12",
    "sha256 9f2c1d0e8b7a6f5e4d3c2b1a09f8e7d6c5b4a3928170f6e5d4c3b2a1908f7e6d",
    "revision 59d61f3ce65a6d9863b86d2e96597125219dc754 of Qwen/Qwen3.5-35B-A3B",
    "results/evidence/20260101T000000.000000Z-smoke-reference-multi_turn-trial1-0a1b2c3d/manifest.json",
    "GPU-fixture-0000-0000-0000-000000000000 leased; token counts: prompt 12, completion 40",
    "ssh://git.example.org/repo.git and https://huggingface.co/Qwen/x/resolve/main/config.json",
    "email someone@example.org about https://host.example/a?b=c&d=e",
])
def test_innocent_text_survives(line):
    assert redact_text(line, {}) == line


def test_redaction_is_idempotent():
    once = redact_text(" ".join(v for v in PLANTED_ENV.values()), PLANTED_ENV)
    assert redact_text(once, PLANTED_ENV) == once


def test_secret_names():
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "FOO_SECRET_BAR", "AWS_SECRET_ACCESS_KEY",
                 "PGPASSWORD", "MYSQL_PWD", "DB_PASS", "GITHUB_PAT", "SLACK_WEBHOOK_URL", "SENTRY_DSN",
                 "AZURE_STORAGE_CONNECTION_STRING", "SESSION_COOKIE", "SSH_PRIVATE_KEY", "OPENAI_APIKEY"):
        assert redaction.is_secret_name(name), name
    for name in ("PATH", "HOME", "PWD", "OLDPWD", "CUDA_VISIBLE_DEVICES", "HF_HOME", "KEYBOARD_LAYOUT",
                 "OMP_NUM_THREADS", "CUDA_CACHE_PATH", "PASSIVE_MODE"):
        assert not redaction.is_secret_name(name), name


def test_config_error_does_not_echo_a_secret_set_value():
    token = f"ghp_{MARK}SetToken000000000000000031"
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "plan", "--config", f"seed={token}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "config key 'seed'" in proc.stderr
    assert MARK not in proc.stderr, proc.stderr


def test_lease_survivor_command_lines_are_scrubbed():
    """A survivor's command line goes into the lease record and the job log (`bench lease` stderr)."""
    import psutil

    from rl_pipeline_bench.leases import procs

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--token", f"{MARK}Survivor0032",
                              f"ghp_{MARK}SurvivorArg0000000000000033"])
    try:
        # Until the child has exec'd, its command line is still the forking parent's.
        deadline = time.monotonic() + 30
        while "time.sleep(30)" not in " ".join(psutil.Process(child.pid).cmdline()) and time.monotonic() < deadline:
            time.sleep(0.05)
        described = procs.describe(psutil.Process(child.pid))
        assert described["pid"] == child.pid and "time.sleep(30)" in described["cmdline"]
        assert MARK not in described["cmdline"], described
    finally:
        child.kill()
        child.wait()


def test_allreduce_probe_records_env_through_the_same_allow_list():
    from rl_pipeline_bench.probes.allreduce import _recorded_env

    env = {**PLANTED_ENV, "NCCL_DEBUG": "INFO", "NCCL_NET_PLUGIN_URL": f"https://u:{MARK}Nccl0034@plugins.internal/x",
           "GLOO_SOCKET_IFNAME": "eth0", "NCCL_IB_TOKEN": f"{MARK}NcclToken0035"}
    rec = _recorded_env(env)
    assert rec["NCCL_DEBUG"] == "INFO" and rec["GLOO_SOCKET_IFNAME"] == "eth0" and rec["NCCL_IB_TOKEN"] == REDACTED
    assert MARK not in json.dumps(rec) and "PGPASSWORD" not in rec and "OMP_NUM_THREADS" not in rec


def test_eval_manifest_and_log_are_owner_only_and_scrubbed(tmp_path):
    import logging
    import stat

    from rl_pipeline_bench.eval.episodes import write_manifest
    from rl_pipeline_bench.records.private_log import private_log_handler

    write_manifest(tmp_path, {"command": "x"})
    assert stat.S_IMODE((tmp_path / "manifest.json").stat().st_mode) == 0o600
    handler = private_log_handler(tmp_path / "eval.log", "%(message)s")
    logger = logging.getLogger("rl_pipeline_bench.test_private_log")
    logger.addHandler(handler)
    try:
        logger.warning("pulling with %s", f"ghp_{MARK}EvalLog000000000000000036")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = (tmp_path / "eval.log").read_text()
    assert "pulling with <redacted>" in text and MARK not in text
    assert stat.S_IMODE((tmp_path / "eval.log").stat().st_mode) == 0o600


def test_framework_variables_are_recorded_because_their_backend_declares_them():
    """A framework's own prefixes come from its descriptor (Backend.env_prefixes), not a list here."""
    from rl_pipeline_bench import backends
    from rl_pipeline_bench.records.redaction import RUN_ENV_PREFIXES

    declared = {p for b in backends.registered() for p in b.env_prefixes}
    assert {"ART_", "SKYRL_", "VLLM_"} <= declared and not declared & set(RUN_ENV_PREFIXES)
    env = {"SKYRL_USE_CUDA_COMPAT": "1", "VLLM_USE_V1": "1", "ART_X": "y", "NOBACKEND_SETTING": "z"}
    skyrl = backends.get("skyrl").env_prefixes
    assert set(recorded_env(env, skyrl)) == {"SKYRL_USE_CUDA_COMPAT", "VLLM_USE_V1"}
    assert recorded_env(env) == {}  # another backend's run records none of them
