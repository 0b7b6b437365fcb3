"""Config validation: bad input names the key and the allowed values, before any job runs."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from rl_pipeline_bench import backends
from rl_pipeline_bench.settings.config import load_config, validate_config
from rl_pipeline_bench.records.configfile import ConfigError, check_member, get_suite
from rl_pipeline_bench.paths import CONFIG_PATH, ROOT


@pytest.fixture()
def config(raw_config):
    """This module checks validation itself: its tests start from the file as YAML gives it."""
    return raw_config


def test_shipped_config_is_valid(config):
    validated = validate_config(copy.deepcopy(config))
    assert get_suite(validated).name == "smoke"
    assert set(get_suite(validated, "comparison")["backends"]) == {"art", "skyrl"}


def test_default_contract_is_five_plus_fifteen(config):
    from rl_pipeline_bench.contract.settings import ContractSettings
    from rl_pipeline_bench.settings.spec import build_spec

    assert ContractSettings().settings() == {"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5}
    for name in ("smoke", "comparison"):
        # the shipped suites leave the contract to its one home, ContractSettings
        assert "contract" not in config["suites"][name]
        contract = build_spec(config, name)["settings"]["contract"]
        assert {k: contract[k] for k in ContractSettings().settings()} == ContractSettings().settings()


def test_unknown_suite_lists_known(config):
    with pytest.raises(ConfigError) as exc:
        load_config(overrides={"suite": "nosuch"})
    assert "nosuch" in str(exc.value)
    assert "comparison, reference_gpu, smoke" in str(exc.value)


def test_configfiles_merge_like_snakemake_then_overrides_apply(config, tmp_path):
    first = tmp_path / "first.yaml"
    first.write_text("suite: reference_gpu\nsuites:\n  smoke:\n    trials: 2\n    contract: {warmup_updates: 1}\n")
    second = tmp_path / "second.yaml"
    second.write_text("suites:\n  smoke:\n    trials: 3\n")
    merged = load_config(configfiles=[first, second], overrides={"suite": "smoke"})
    smoke = merged["suites"]["smoke"]
    # nested mappings merge (the rest of the suite and of its contract stay), later files win,
    # and --config overrides apply last, as `snakemake --configfile A B --config k=v` does
    assert smoke["trials"] == 3 and smoke["backends"] == config["suites"]["smoke"]["backends"]
    assert smoke["contract"]["warmup_updates"] == 1
    assert smoke["contract"] == {"warmup_updates": 1}  # the other keys take ContractSettings' defaults
    assert merged["suite"] == "smoke"
    bad = tmp_path / "bad.yaml"
    bad.write_text("suites:\n  smoke:\n    trials: many\n")
    with pytest.raises(ConfigError, match="trials"):
        load_config(configfiles=[bad])
    with pytest.raises(ConfigError, match="not found"):
        load_config(configfiles=[tmp_path / "missing.yaml"])



# ------------------------------------------------------------------ settings typed on a command line


def test_config_items_are_read_and_merged_as_snakemake_reads_them():
    """bench's --config against Snakemake's own parser: the same mapping for the same words."""
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    from rl_pipeline_bench.settings.overrides import merge_config, parse_config_items

    words = ["suite=comparison", "seed=7", "scale=0.5", "flag=True", "empty=",
             "suites={smoke: {trials: 2, contract: {warmup_updates: 1}}}", "suites={smoke: {scale: 0.01}}",
             "gpu_sets=[0,1]"]
    assert parse_config_items(words) == parse_config(words)
    base = {"suites": {"smoke": {"trials": 1, "backends": ["reference"]}, "other": {"x": 1}}, "seed": 3}
    for overwrite in (parse_config(words), {"suites": 5}, {"seed": {"a": 1}}, {"new": {"b": {"c": 2}}}):
        ours, theirs = copy.deepcopy(base), copy.deepcopy(base)
        update_config(theirs, copy.deepcopy(overwrite))
        assert merge_config(ours, copy.deepcopy(overwrite)) == theirs
    with pytest.raises(ConfigError, match="no '='"):
        parse_config_items(["suite"])
    with pytest.raises(ConfigError, match="a key starts with"):
        parse_config_items(["1x=2"])


def test_nested_strings_from_the_command_line_take_the_schemas_types(config):
    """Snakemake passes `--config 'suites={smoke: {trials: 2}}'` as trials '2'; the schema types it."""
    config["suites"]["smoke"].update(trials="2", scale="0.01", contract={"extra_offered_updates": "0"})
    config["statistics"] = {"cv_bound": "0.1", "min_trials": "4"}
    config["suites"]["smoke"]["probes"] = {"allreduce": {"world_size": "null"}}
    hub = next(name for name, m in config["models"].items() if m["source"] == "hub")
    config["models"][hub]["revision"] = "1" * 40  # a string key keeps a string that looks numeric
    validated = validate_config(config)
    smoke = validated["suites"]["smoke"]
    assert (smoke["trials"], smoke["scale"], smoke["contract"]["extra_offered_updates"]) == (2, 0.01, 0)
    assert validated["statistics"] == {"cv_bound": 0.1, "min_trials": 4}
    assert smoke["probes"]["allreduce"]["world_size"] is None
    assert validated["models"][hub]["revision"] == "1" * 40
    config["suites"]["smoke"]["trials"] = "many"
    with pytest.raises(ConfigError, match="suites/smoke/trials"):
        validate_config(config)
    config["suites"]["smoke"]["trials"] = "2.0"  # JSON Schema's integer, strict here: never 2.0
    with pytest.raises(ConfigError, match="suites/smoke/trials"):
        validate_config(config)


def test_bench_config_merges_into_the_suite_like_snakemake(config):
    """`--config 'suites={smoke: {trials: 2}}'` changes one key of the suite; the rest stays."""
    from rl_pipeline_bench.settings.overrides import parse_config_items

    merged = load_config(overrides=parse_config_items(["suites={smoke: {trials: 2}}", "suite=smoke"]))
    assert merged["suites"]["smoke"]["trials"] == 2
    shipped = validate_config(copy.deepcopy(config))["suites"]["smoke"]
    assert {k: v for k, v in merged["suites"]["smoke"].items() if k != "trials"} == \
        {k: v for k, v in shipped.items() if k != "trials"}


def test_bench_plan_takes_snakemakes_config_words():
    import json

    proc = _bench("plan", "--config", "suite=comparison", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["suite"] == "comparison"
    proc = _bench("plan", "--config", "suites={smoke: {trials: 2}}", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["spec"]["about"]["trials"] == 2 and len(plan["runs"]) == 2 * len(plan["spec"]["settings"]["workloads"])


@pytest.mark.workflow
def test_snakemake_takes_a_nested_config_value_as_its_type():
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "reports/comparison.html",
                           "--config", "suites={smoke: {trials: 2}}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "trial2" in out and "is not of type" not in out

def test_bad_enum_names_key_and_allowed_values(config):
    config["suites"]["smoke"]["backends"] = ["reference", "trl"]
    with pytest.raises(ConfigError) as exc:
        validate_config(config)
    msg = str(exc.value)
    assert "suites/smoke/backends/1" in msg
    assert f"allowed: {', '.join(backends.names())}" in msg  # the registry's list, whatever it holds


def test_unknown_key_lists_allowed_keys(config):
    config["suites"]["smoke"]["sclae"] = 0.5
    with pytest.raises(ConfigError) as exc:
        validate_config(config)
    assert "sclae" in str(exc.value) and "scale" in str(exc.value)


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda c: c["suites"]["smoke"].update(contract={"headline_updates": 99}), "suites/smoke/contract"),
        (lambda c: c["suites"]["smoke"].update(contract={"measured_updates": 3}),
         "headline_updates (5) exceeds measured_updates (3)"),
        (lambda c: c["suites"]["smoke"].update(gpus=2), "suites/smoke/gpus"),
        (lambda c: c["suites"]["comparison"].update(gpu_sets=["0,1"]), "gpu_sets"),
        (lambda c: c["suites"]["smoke"].update(model="nomodel"), "unknown model 'nomodel'"),
        (lambda c: c["workloads"]["multi_turn"]["completion_tokens"].__setitem__(0, [0.1, 64]), "start at p=0"),
        (lambda c: c["workloads"]["multi_turn"]["completion_tokens"].reverse(), "workloads/multi_turn/completion_tokens"),
        (lambda c: c["models"]["qwen3.5-35b-a3b"].pop("revision"), "must pin a 40-hex revision"),
    ],
)
def test_cross_field_errors_name_the_key(config, mutate, needle):
    mutate(config)
    with pytest.raises(ConfigError) as exc:
        validate_config(config)
    assert needle in str(exc.value)


def test_check_member_lists_known():
    with pytest.raises(ConfigError, match=r"unknown workload 'x' \(known workloads: a, b\)"):
        check_member("workload", "x", ["a", "b"])


@pytest.mark.workflow
def test_snakemake_refuses_unknown_suite_before_any_job(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "-n", "--config", "suite=nosuch"],
        cwd=ROOT, capture_output=True, text=True,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "unknown suite 'nosuch'" in out and "smoke" in out


def test_bench_cli_unknown_backend_exits_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--backend", "trl", "--workload", "multi_turn"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert f"unknown backend 'trl' (known backends: {', '.join(backends.names())})" in proc.stderr


# ------------------------------------------------------------------ non-finite numbers


@pytest.mark.parametrize("mutate, key", [
    (lambda c: c["suites"]["smoke"].update(scale=float("nan")), "suites/smoke/scale"),
    (lambda c: c["workloads"]["multi_turn"]["completion_tokens"][1].__setitem__(1, float("nan")),
     "workloads/multi_turn/completion_tokens/1/1"),
    (lambda c: c["workloads"]["tool_history"]["prompt_tokens"][0].__setitem__(1, float("-inf")),
     "workloads/tool_history/prompt_tokens/0/1"),
    (lambda c: c["reference"].update(learning_rate=float("nan")), "reference/learning_rate"),
    (lambda c: c["reference"].update(lora_alpha=float("inf")), "reference/lora_alpha"),
])
def test_non_finite_numbers_are_refused_naming_the_key(config, mutate, key):
    mutate(config)
    with pytest.raises(ConfigError) as exc:
        validate_config(config)
    assert f"config key '{key}'" in str(exc.value) and "not a finite number" in str(exc.value)


def _write_yaml_config(tmp_path, text_edit=None, mutate=None):
    text = CONFIG_PATH.read_text()
    if mutate is not None:
        data = yaml.safe_load(text)
        mutate(data)
        text = yaml.safe_dump(data, sort_keys=False)
    if text_edit is not None:
        text = text_edit(text)
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def _bench(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _nan_scale_config(tmp_path):
    path = _write_yaml_config(tmp_path, mutate=lambda c: c["suites"]["smoke"].update(scale="NAN"),
                              text_edit=lambda t: t.replace("scale: NAN", "scale: .nan"))
    assert "scale: .nan" in path.read_text()
    return path


def test_yaml_nan_is_refused_by_bench(tmp_path):
    proc = _bench("plan", "--configfile", str(_nan_scale_config(tmp_path)))
    assert proc.returncode == 2 and "suites/smoke/scale" in proc.stderr and "not a finite number" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.workflow
def test_yaml_nan_is_refused_by_snakemake_before_any_job(tmp_path):
    path = _nan_scale_config(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "--configfile", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "suites/smoke/scale" in out and "not a finite number" in out
    assert "Job stats" not in out  # refused while parsing, before any job was planned


def test_a_nan_config_value_is_refused():
    proc = _bench("plan", "--config", "seed=nan")
    assert proc.returncode == 2 and "config key 'seed'" in proc.stderr and "not a finite number" in proc.stderr


# ------------------------------------------------------------------ names that become paths


def _rename(mapping: dict, old: str, new: str) -> None:
    mapping[new] = mapping.pop(old)


@pytest.mark.parametrize("mutate, where, name", [
    (lambda c: (_rename(c["suites"], "smoke", "../escape"), c.update(suite="../escape")), "suites", "../escape"),
    (lambda c: _rename(c["suites"], "smoke", "a/b"), "suites", "a/b"),
    (lambda c: _rename(c["suites"], "smoke", ".hidden"), "suites", ".hidden"),
    (lambda c: (_rename(c["models"], "reference-tiny-qwen3moe", "../../m"),
                c["suites"]["smoke"].update(model="../../m")), "models", "../../m"),
    (lambda c: c["workloads"].__setitem__("../w", c["workloads"]["multi_turn"]), "workloads", "../w"),
    (lambda c: c["suites"]["smoke"].update(model="m/../../x"), "suites/smoke/model", "m/../../x"),
    (lambda c: c.update(suite="../smoke"), "suite", "../smoke"),
    (lambda c: _rename(c["suites"], "smoke", "with space"), "suites", "with space"),
])
def test_names_that_become_paths_must_be_safe(config, mutate, where, name):
    mutate(config)
    with pytest.raises(ConfigError) as exc:
        validate_config(config)
    msg = str(exc.value)
    assert f"config key '{where}'" in msg and repr(name) in msg and "not a safe name" in msg, msg


def test_hub_repo_id_cannot_climb(config):
    cfg = validate_config(config)
    cfg["models"]["qwen3.5-35b-a3b"]["repo_id"] = "../.."
    with pytest.raises(ConfigError, match="models/qwen3.5-35b-a3b/repo_id"):
        validate_config(cfg)


@pytest.mark.workflow
def test_snakemake_refuses_an_unsafe_suite_name_before_any_job(tmp_path):
    path = _write_yaml_config(tmp_path, mutate=lambda c: (_rename(c["suites"], "smoke", "../../outside"),
                                                          c.update(suite="../../outside")))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "--configfile", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "not a safe name" in out and "'../../outside'" in out
    assert "Job stats" not in out


# ------------------------------------------------------------------ config files of the wrong shape


BAD_CONFIG_FILES = [
    ("- a\n- b\n", "Config file must be given as JSON or YAML with keys at top level."),
    ("42\n", "Config file must be given as JSON or YAML with keys at top level."),
    ("", "Config file must be given as JSON or YAML with keys at top level."),
    ("suite: [smoke,\n  seed: 1\n", "Config file is not valid JSON or YAML."),
    ("suite: smoke\n\tseed: 1\n", "Config file is not valid JSON or YAML."),
]


@pytest.mark.parametrize("text, sentence", BAD_CONFIG_FILES)
def test_bad_config_files_give_snakemakes_named_error(tmp_path, text, sentence):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    # (`bench report` reads the resolved run spec, never a config file: tests/test_spec.py covers a bad spec.)
    for argv in (["plan", "--configfile", str(path)],
                 ["run", "--configfile", str(path), "--backend", "reference", "--workload", "multi_turn"]):
        proc = _bench(*argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert sentence in proc.stderr and str(path) in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.workflow
@pytest.mark.parametrize("text, sentence", BAD_CONFIG_FILES)
def test_snakemake_names_a_bad_config_file_in_the_same_words(tmp_path, text, sentence):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    snake = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "--configfile", str(path)],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    if text:  # Snakemake reads an empty --configfile as "no overrides"
        assert snake.returncode != 0 and sentence in snake.stdout + snake.stderr


def test_a_bad_config_value_is_a_named_error():
    proc = _bench("plan", "--config", "seed=[1,")
    assert proc.returncode == 2 and "--config: a value is not valid YAML" in proc.stderr and "[1," not in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.workflow
def test_wildcards_that_become_paths_must_be_safe_names():
    # A workload wildcard "a/b" made the plan rule schedule a job (creating results/workloads/smoke/a/ and its log dir).
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n",
                           "results/workloads/smoke/a/b.parquet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "MissingRuleException" in out, out[-2000:]


@pytest.mark.parametrize("trials, words", [("1.0", "is not of type 'integer'"),
                                           ("1000000000000", "is greater than the maximum of 100")])
def test_a_count_is_an_integer_within_its_documented_maximum(tmp_path, trials, words):
    """`trials: 1.0` used to reach range() (TypeError); `trials: 10**12` was planned until memory ran out."""
    import time
    from pathlib import Path

    override = tmp_path / "trials.yaml"
    override.write_text(f"suites: {{smoke: {{trials: {trials}}}}}\n")
    started = time.monotonic()
    proc = subprocess.run([str(Path(sys.executable).parent / "bench"), "plan", "--configfile", str(override)],
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 60
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (f"bench plan: invalid configuration: config key 'suites/smoke/trials': "
                                   f"{trials} {words}"), proc.stderr
