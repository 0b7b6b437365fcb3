"""The resolved run spec: what it holds, what its hash covers, and how a mismatch is refused."""

from __future__ import annotations

import json

import pytest
from evidence_fixtures import build_evidence

from rl_pipeline_bench.cli import main as bench
from rl_pipeline_bench.records.configfile import ConfigError, get_suite
from rl_pipeline_bench.contract.settings import ContractSettings
from rl_pipeline_bench.settings.spec import SpecError, build_spec, check_evidence_spec, check_spec, load_spec, settings_hash, write_spec


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
    lambda c: c["probes"]["storage"].update(directory="/mnt/elsewhere"),
    lambda c: c["probes"]["checkpoint"].update(directory="/mnt/elsewhere"),
], ids=["scale", "contract", "extra-offered", "seed", "distribution", "backend-setting", "workload-scale",
        "telemetry-off", "telemetry-interval", "storage-size", "allreduce-min-bytes", "storage-directory",
        "checkpoint-directory"])
def test_settings_that_change_the_work_change_the_hash(config, edit):
    before = _hash(config)
    edit(config)
    assert _hash(config) != before


@pytest.mark.parametrize("edit", [
    lambda c: c["suites"]["smoke"].update(description="other words"),
    lambda c: c["workloads"]["tool_history"].update(description="other words"),
    lambda c: c["suites"]["comparison"].update(scale=0.5),
    lambda c: c.update(hf_cache="/elsewhere"),
    lambda c: c["probes"]["storage"].update(timeout_s=60),
    lambda c: c["probes"]["allreduce"].update(timeout_s=60),
    lambda c: c["suites"]["smoke"].update(trials=2),
    lambda c: c["suites"]["smoke"].update(contract={"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5}),
], ids=["description", "workload-description", "other-suite", "hf-cache", "storage-timeout", "allreduce-timeout",
        "trials", "contract-defaults-spelled-out"])
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
        # The scratch directory decides which filesystem is measured: hashed; the time limit is not.
        assert spec.settings["probes"]["storage"]["directory"] == config["probes"]["storage"]["directory"]
        assert spec.settings["probes"]["checkpoint"]["directory"] == config["probes"]["checkpoint"]["directory"]
        assert "timeout_s" not in spec.settings["probes"]["storage"]
        assert spec.doc["about"]["probes"]["storage"]["timeout_s"] == config["probes"]["storage"]["timeout_s"]
    smoke = check_spec(build_spec(config, "smoke")).settings["probes"]
    assert smoke["allreduce"]["backend"] == "gloo" and smoke["allreduce"]["world_size"] == 2
    assert smoke["storage"]["size_bytes"] == config["suites"]["smoke"]["probes"]["storage"]["size_bytes"]
    gpu = check_spec(build_spec(config, "comparison")).settings["probes"]
    hashed_allreduce = {k: v for k, v in config["probes"]["allreduce"].items() if k != "timeout_s"}
    assert gpu["allreduce"] == {**hashed_allreduce, "backend": "nccl", "world_size": 4}
    assert gpu["checkpoint"] == {"device": "cuda", "lora_rank": config["probes"]["checkpoint"]["lora_rank"],
                                 "lora_alpha": config["probes"]["checkpoint"]["lora_alpha"],
                                 "directory": config["probes"]["checkpoint"]["directory"]}
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


# --------------------------------------------------------------------------- a forged spec file

def _forge(config, tmp_path, edit):
    """A spec file whose settings were edited and whose hash and id were recomputed to match."""
    doc = build_spec(config, "smoke")
    edit(doc["settings"])
    try:
        doc["hash"] = settings_hash(doc["settings"])
    except ValueError:  # NaN: no hash can be recomputed; the file keeps the old one
        pass
    doc["id"] = f"smoke-{doc['hash']}"
    path = tmp_path / f"{doc['id']}.json"
    path.write_text(json.dumps(doc))
    return path


FORGERIES = {
    "trials-negative": (lambda s: s.update(trials=-1), "settings/trials"),
    "trials-float": (lambda s: s.update(trials=1.0), "settings/trials"),
    "trials-huge": (lambda s: s.update(trials=10 ** 12), "settings/trials"),
    "scale-50": (lambda s: s["workload_scale"].update(multi_turn=50), "settings/workload_scale/multi_turn"),
    "warmup-0": (lambda s: s["contract"].update(warmup_updates=0), "settings/contract/warmup_updates"),
    "unknown-key": (lambda s: s.update(surprise=1), "surprise"),
    "workload-dotdot": (lambda s: s.update(workloads=["../../x"]), "settings/workloads/0"),
    "model-hash": (lambda s: s["model"].update(build_config_sha256="0" * 64), "build_config_sha256"),
    "nan": (lambda s: s["contract"].update(extra_offered_updates=float("nan")), "settings/contract/extra_offered_updates"),
    "headline-over-measured": (lambda s: s["contract"].update(headline_updates=99), "headline_updates"),
}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_a_forged_spec_with_a_recomputed_hash_is_refused(config, tmp_path, capsys, name):
    import time

    edit, key = FORGERIES[name]
    path = _forge(config, tmp_path, edit)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert key in str(err.value) and str(path) in str(err.value), str(err.value)
    for argv in (["spec", "check", str(path)], ["plan", "--spec", str(path)],
                 ["write-plan", "--spec", str(path), "--workload", "multi_turn", "--output", str(tmp_path / "p.parquet")]):
        started = time.monotonic()
        assert bench(argv) == 2, argv
        assert time.monotonic() - started < 10, argv  # trials 10**12 is refused, not planned
        err_text = capsys.readouterr().err
        assert key in err_text and "Traceback" not in err_text, err_text
    assert not (tmp_path / "p.parquet").exists()


def test_every_count_of_the_schema_has_a_maximum():
    """Counts are bounded (docs/run-spec.md, "Bounds"), so a typo is refused instead of exhausting memory."""
    from rl_pipeline_bench.settings.config import config_schema

    unbounded = []

    def walk(node, where):
        if isinstance(node, dict):
            if "integer" in ([node["type"]] if isinstance(node.get("type"), str) else node.get("type") or []) \
                    and "maximum" not in node and "enum" not in node:
                unbounded.append(where)
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}/{i}")

    walk(config_schema(), "")
    assert unbounded == [], unbounded


# --------------------------------------------------------------------------- the model a run is given

def _local_record(config, tmp_path, **build_edits):
    """A model identity record whose snapshot says it was built from the smoke model's build config (edited)."""
    from rl_pipeline_bench.paths import ROOT
    from rl_pipeline_bench.models.reference import BUILD_RECORD, load_build_config

    model = config["models"]["reference-tiny-qwen3moe"]
    snap = tmp_path / f"snapshot-{len(list(tmp_path.glob('snapshot-*')))}"
    snap.mkdir()
    built = {**load_build_config(ROOT / model["build_config"]), **build_edits}
    (snap / BUILD_RECORD).write_text(json.dumps({"schema": "rl-bench/reference-build/v1", "build_config": built}))
    return {"model": "reference-tiny-qwen3moe", "source": "local", "repo_id": model["repo_id"],
            "revision": "0" * 40, "snapshot_path": str(snap)}


def test_a_run_refuses_a_model_record_that_is_not_the_specs_model(config, tmp_path, capsys):
    from rl_pipeline_bench.models.identity import check_model_record

    spec = check_spec(build_spec(config, "smoke"))
    model = spec.settings["model"]
    check_model_record(_local_record(config, tmp_path), model, "record")  # the spec's own model passes
    for record, words in ((_local_record(config, tmp_path, init_std=0.5), "another build config"),
                          ({**_local_record(config, tmp_path), "model": "qwen3.5-35b-a3b"}, "name 'qwen3.5-35b-a3b'"),
                          ({**_local_record(config, tmp_path), "repo_id": "x/y"}, "repo_id 'x/y'")):
        with pytest.raises(ConfigError, match=words):
            check_model_record(record, model, "record")
    hub = check_spec(build_spec(config, "comparison")).settings["model"]
    with pytest.raises(ConfigError, match="revision 'f{40}', the spec pins"):
        check_model_record({"model": hub["name"], "source": "hub", "repo_id": hub["repo_id"], "revision": "f" * 40},
                           hub, "record")
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_local_record(config, tmp_path, init_std=0.5)))
    argv = ["run", "--suite", "smoke", "--backend", "reference", "--workload", "multi_turn", "--model-record",
            str(other), "--evidence-root", str(tmp_path / "evidence"), "--plan", str(tmp_path / "none.parquet")]
    assert bench(argv) == 2
    assert "is not the model of the run spec" in capsys.readouterr().err
    assert not (tmp_path / "evidence").exists(), "refused before any evidence is written"
