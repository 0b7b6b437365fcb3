"""The resolved run spec: what it holds, what its hash covers, and how a mismatch is refused."""

from __future__ import annotations

import copy
import json

import pytest
from evidence_fixtures import build_evidence

from rl_pipeline_bench.cli import main as bench
from rl_pipeline_bench.config import load_config
from rl_pipeline_bench.contract.settings import ContractSettings
from rl_pipeline_bench.spec import (
    SpecError, build_spec, check_evidence_spec, check_spec, load_spec, settings_hash, write_spec,
)


@pytest.fixture()
def config():
    return copy.deepcopy(load_config())


def _hash(config, suite="smoke"):
    return build_spec(config, suite)["hash"]


def test_spec_holds_every_resolved_setting(config):
    doc = build_spec(config, "smoke")
    s = doc["settings"]
    assert doc["id"] == f"smoke-{doc['hash']}" and len(doc["hash"]) == 12
    assert s["suite"] == "smoke" and s["backends"] == ["reference"] and "trials" not in s
    assert doc["about"]["trials"] == 1 and check_spec(doc).trials == 1
    assert s["seed"] == config["seed"] and s["scale"] == 0.02
    assert s["workload_scale"] == {w: 0.02 for w in s["workloads"]}
    assert {k: v for k, v in s["model"].items() if k != "build_config_sha256"} == {
        "name": "reference-tiny-qwen3moe", **config["models"]["reference-tiny-qwen3moe"]}
    assert len(s["model"]["build_config_sha256"]) == 64
    assert s["contract"] == {**ContractSettings().settings(), "extra_offered_updates": 4}
    assert set(s["workload_distributions"]) == set(s["workloads"])
    assert "description" not in s["workload_distributions"]["multi_turn"]
    assert s["backend_settings"] == {"reference": config["reference"]}
    assert doc["about"]["description"].startswith("Embedded reference backend")


@pytest.mark.parametrize("edit", [
    lambda c: c["suites"]["smoke"].update(scale=0.03),
    lambda c: c["suites"]["smoke"].setdefault("contract", {}).update(measured_updates=14),
    lambda c: c["suites"]["smoke"].setdefault("contract", {}).update(extra_offered_updates=0),
    lambda c: c.update(seed=1),
    lambda c: c["workloads"]["tool_history"]["completion_tokens"][1].__setitem__(1, 65),
    lambda c: c["reference"].update(learning_rate=2e-4),
    lambda c: c["suites"]["smoke"].update(workload_scale={"tool_history": 0.5}),
    lambda c: c["probes"]["telemetry"].update(enabled=False),
    lambda c: c["probes"]["telemetry"].update(interval_s=0.5),
    lambda c: c["suites"]["smoke"]["probes"]["storage"].update(size_bytes=1 << 20),
    lambda c: c["probes"]["allreduce"].update(min_bytes=16),
], ids=["scale", "contract", "extra-offered", "seed", "distribution", "backend-setting", "workload-scale",
        "telemetry-off", "telemetry-interval", "storage-size", "allreduce-min-bytes"])
def test_settings_that_change_the_work_change_the_hash(config, edit):
    before = _hash(config)
    edit(config)
    assert _hash(config) != before


@pytest.mark.parametrize("edit", [
    lambda c: c["suites"]["smoke"].update(description="other words"),
    lambda c: c["workloads"]["tool_history"].update(description="other words"),
    lambda c: c["suites"]["comparison"].update(scale=0.5),
    lambda c: c.update(hf_cache="/elsewhere"),
    lambda c: c["probes"]["storage"].update(directory="/mnt/elsewhere"),
    lambda c: c["probes"]["checkpoint"].update(directory="/mnt/elsewhere"),
    lambda c: c["probes"]["allreduce"].update(timeout_s=60),
    lambda c: c["suites"]["smoke"].update(trials=2),
    lambda c: c["suites"]["smoke"].update(contract={"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5}),
], ids=["description", "workload-description", "other-suite", "hf-cache", "storage-directory",
        "checkpoint-directory", "allreduce-timeout", "trials", "contract-defaults-spelled-out"])
def test_settings_that_do_not_change_the_work_keep_the_hash(config, edit):
    before = _hash(config)
    edit(config)
    assert _hash(config) == before


def test_a_workload_outside_the_suite_is_not_hashed(config):
    config["suites"]["smoke"]["workloads"] = ["multi_turn"]
    before = _hash(config)
    config["workloads"]["tool_history"]["group_size"] = 2
    assert _hash(config) == before


def test_run_spec_views_give_the_suite_typed(config):
    spec = check_spec(build_spec(config, "comparison"))
    suite = config["suites"]["comparison"]
    assert not hasattr(spec, "as_config")  # the spec is the one shape; nothing turns it back into a config
    assert isinstance(spec.contract, ContractSettings) and spec.contract.total_updates == spec.trained_updates == 20
    assert spec.offered_updates == 20 + spec.extra_offered_updates
    assert (spec.backends, spec.workloads, spec.trials) == (suite["backends"], suite["workloads"], suite["trials"])
    assert (spec.runtime, spec.device, spec.gpus, spec.gpu_sets) == ("container", "cuda", 4, suite["gpu_sets"])
    assert spec.model["repo_id"] == "Qwen/Qwen3.5-35B-A3B" and spec.seed == config["seed"]
    assert spec.backend_settings("art") == {} and spec.get("skyrl_batch_size", 4) == 4
    smoke = check_spec(build_spec(config, "smoke"))
    assert smoke.backend_settings("reference") == config["reference"]


def test_a_spec_written_with_trials_among_its_settings_still_reads(config):
    doc = build_spec(config, "smoke")
    doc["settings"]["trials"] = 3  # the layout before trials left the hash
    doc["hash"] = settings_hash(doc["settings"])
    doc["id"] = f"smoke-{doc['hash']}"
    assert check_spec(doc).trials == 3


def test_probe_settings_are_resolved_in_the_spec_and_placement_kept_apart(config):
    from rl_pipeline_bench.probes.settings import probe_settings

    for name in ("smoke", "reference_gpu", "comparison"):
        spec = check_spec(build_spec(config, name))
        assert spec.probes == probe_settings(config, config["suites"][name]), name
        assert "directory" not in spec.settings["probes"]["storage"]  # where, not what: unhashed
        assert spec.doc["about"]["probes"]["storage"]["directory"] == config["probes"]["storage"]["directory"]
    smoke = check_spec(build_spec(config, "smoke")).settings["probes"]
    assert smoke["allreduce"]["backend"] == "gloo" and smoke["allreduce"]["world_size"] == 2
    assert smoke["storage"]["size_bytes"] == config["suites"]["smoke"]["probes"]["storage"]["size_bytes"]
    gpu = check_spec(build_spec(config, "comparison")).settings["probes"]
    hashed_allreduce = {k: v for k, v in config["probes"]["allreduce"].items() if k != "timeout_s"}
    assert gpu["allreduce"] == {**hashed_allreduce, "backend": "nccl", "world_size": 4}
    assert gpu["checkpoint"] == {"device": "cuda", "lora_rank": config["probes"]["checkpoint"]["lora_rank"],
                                 "lora_alpha": config["probes"]["checkpoint"]["lora_alpha"]}
    # the checkpoint probe has its own settings: a suite without the reference backend needs no `reference:`
    assert "reference" not in check_spec(build_spec(config, "comparison")).settings["backend_settings"]


def test_edited_spec_file_is_refused_naming_both_hashes(config, tmp_path):
    spec = write_spec(build_spec(config, "smoke"), tmp_path / f"{_hash(config)}.json")
    doc = json.loads(spec.path.read_text())
    doc["settings"]["scale"] = 0.5
    spec.path.write_text(json.dumps(doc))
    with pytest.raises(SpecError) as e:
        load_spec(spec.path)
    assert doc["hash"] in str(e.value) and settings_hash(doc["settings"]) in str(e.value)


def test_spec_file_named_for_another_hash_is_refused(config, tmp_path):
    doc = build_spec(config, "smoke")
    wrong = tmp_path / "smoke-0123456789ab.json"
    wrong.write_text(json.dumps(doc))
    with pytest.raises(SpecError, match=f"0123456789ab.*{doc['hash']}"):
        load_spec(wrong)
    with pytest.raises(SpecError, match="refusing"):
        write_spec(doc, wrong)


def test_evidence_of_another_spec_is_refused(config):
    spec = check_spec(build_spec(config, "smoke"))
    check_evidence_spec({"spec": {"hash": spec.hash}}, spec, "evidence X")
    with pytest.raises(SpecError, match=f"spec hash feedfeedfeed.*{spec.hash}"):
        check_evidence_spec({"spec": {"hash": "feedfeedfeed"}}, spec, "evidence X")
    with pytest.raises(SpecError, match="no spec hash"):
        check_evidence_spec({}, spec, "evidence X")


def test_cli_write_check_show(config, tmp_path, capsys):
    doc = build_spec(config, "smoke")
    out = tmp_path / f"{doc['id']}.json"
    assert bench(["spec", "write", "--doc", json.dumps(doc), "--output", str(out)]) == 0
    assert bench(["spec", "check", str(out)]) == 0
    assert bench(["spec", "show", "--suite", "smoke"]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 2)[-1])["id"] == doc["id"]
    doc["hash"] = "0" * 12
    assert bench(["spec", "write", "--doc", json.dumps(doc), "--output", str(tmp_path / "x.json")]) == 2
    assert "hash to" in capsys.readouterr().err


def test_a_local_models_build_config_content_is_hashed(config, tmp_path):
    from rl_pipeline_bench.paths import ROOT

    build = tmp_path / "model.yaml"
    build.write_text((ROOT / config["models"]["reference-tiny-qwen3moe"]["build_config"]).read_text())
    config["models"]["reference-tiny-qwen3moe"]["build_config"] = str(build)
    before = _hash(config)
    build.write_text(build.read_text().replace("init_std: 0.02", "init_std: 0.03"))
    assert _hash(config) != before


@pytest.mark.parametrize("text", ["- a\n- b\n", "{not json", '{"schema": "other"}'])
def test_commands_refuse_a_bad_spec_file_naming_it(tmp_path, capsys, text):
    bad = tmp_path / "smoke-0123456789ab.json"
    bad.write_text(text)
    for argv in (["report", "--spec", str(bad), "--summaries", str(tmp_path / "s.json"), "--plans", str(tmp_path / "p")],
                 ["run", "--spec", str(bad), "--backend", "reference", "--workload", "multi_turn"],
                 ["write-plan", "--spec", str(bad), "--workload", "multi_turn", "--output", str(tmp_path / "p")]):
        assert bench(argv) == 2, argv
        err = capsys.readouterr().err
        assert str(bad) in err and "Traceback" not in err, err


def test_summarize_run_refuses_evidence_of_another_spec_naming_both(config, tmp_path, capsys):
    """`bench summarize-run --spec`: a run record or evidence manifest of another spec hash is refused."""
    doc = build_spec(config, "smoke")
    spec = write_spec(doc, tmp_path / "specs" / f"{doc['id']}.json")
    out = tmp_path / "summary.json"
    for record_hash, manifest_hash in ((spec.hash, "feedfeedfeed"), ("feedfeedfeed", spec.hash)):
        ev = build_evidence(tmp_path / f"evidence-{record_hash}", manifest={"spec": {"hash": manifest_hash}})
        run_json = tmp_path / f"run-{record_hash}.json"
        run_json.write_text(json.dumps({"evidence_dir": str(ev), "spec_hash": record_hash}))
        assert bench(["summarize-run", str(run_json), "--output", str(out), "--spec", str(spec.path)]) == 2
        err = capsys.readouterr().err
        assert "feedfeedfeed" in err and spec.hash in err, err
        assert not out.exists(), "no summary is written for evidence of another spec"
