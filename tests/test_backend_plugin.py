"""Adding a backend is one package plus one recipe folder, and nothing else.

A scratch copy of the repository gets exactly `src/rl_pipeline_bench/backends/toy/`
and `containers/toy/` (tests/fixtures/toy_backend/) as code; a suite using it and
its own `toy:` section are config data (added to the copy's config.yaml, because
jobs read that file). The registry then offers the toy backend everywhere (schema,
CLI choices, wildcards, provenance, suite checks, manifests, its environment
variables, its host hook in a Kubernetes qualification), the pipeline plans and runs
it to a rendered report, and the other backends' recipes are untouched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_copy import copy_repo, scheduled_jobs, snakemake, workflow_env

from rl_pipeline_bench import backends
from rl_pipeline_bench.provenance import recipes as provenance
from rl_pipeline_bench.paths import ROOT

# Slow tier (tests/conftest.py): real Snakemake runs in a scratch copy.
pytestmark = pytest.mark.e2e

FIXTURE = Path(__file__).parent / "fixtures" / "toy_backend"
#: The backends of the real tree (the registry's list, so adding one changes no assertion here).
REGISTERED = backends.names()
TOY_SUITE = {
    "description": "Toy backend added as a plugin (test).",
    "backends": ["toy"],
    "workloads": ["tool_history"],
    "trials": 1,
    "scale": 0.02,
    "model": "reference-tiny-qwen3moe",
    "runtime": "native",
    "device": "cpu",
    "gpus": 0,
    "toy_delay_s": 0.0005,
    "contract": {"warmup_updates": 2, "measured_updates": 3, "headline_updates": 2},
}


#: The toy backend's own top-level config section (its descriptor's config_schema requires it).
TOY_SECTION = {"served_by": "toy-server-7"}
TOY_PROBES = yaml.safe_load((ROOT / "config.yaml").read_text())["suites"]["smoke"]["probes"]


def _config_file(path: Path, **suite_changes) -> Path:
    """config.yaml plus the toy suite (selected), written to path.

    The toy suite takes the smoke suite's probe sizes: the defaults are sized for GPU
    hosts (a 4 GiB storage test file), which a CI disk need not have free.
    """
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["suite"] = "toy"
    config["suites"]["toy"] = dict(TOY_SUITE, probes=TOY_PROBES, **suite_changes)
    config["toy"] = dict(TOY_SECTION)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _bench(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", *args], cwd=workdir,
                          env=workflow_env(workdir, own_source=True), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def toy_repo(tmp_path_factory) -> Path:
    workdir = copy_repo(tmp_path_factory.mktemp("plugin") / "repo")
    shutil.copytree(FIXTURE / "package", workdir / "src/rl_pipeline_bench/backends/toy")
    shutil.copytree(FIXTURE / "recipe", workdir / "containers/toy")
    _config_file(workdir / "config.yaml")
    return workdir


def _spec_id(repo: Path) -> str:
    """The toy suite's run spec id, resolved by the copy's own package (where the toy backend is registered)."""
    plan = _bench(repo, "plan", "--suite", "toy", "--json")
    assert plan.returncode == 0, plan.stderr
    return json.loads(plan.stdout)["spec"]["id"]


def test_registry_offers_the_added_backend_everywhere(toy_repo, tmp_path):
    assert provenance.recipe_manifest(toy_repo).keys() == {*REGISTERED, "toy"}
    # Adding a backend changes no other backend's recipe.
    before = provenance.recipe_manifest(ROOT)
    after = provenance.recipe_manifest(toy_repo)
    assert {b: after[b] for b in before} == before
    toy_files = provenance.recipe_record("toy", toy_repo)["files"]
    assert {f for f in toy_files if not f.startswith(("containers/common/",))} == {
        "containers/toy/Dockerfile", "containers/toy/env.sh", "containers/toy/pins.env", "containers/toy/setup.sh",
        "src/rl_pipeline_bench/backends/toy/__init__.py", "pyproject.toml", "uv.lock"}

    schema = json.loads(_bench(toy_repo, "schema").stdout)
    suite = schema["properties"]["suites"]["additionalProperties"]
    assert suite["properties"]["backends"]["items"]["enum"] == sorted([*REGISTERED, "toy"])
    # Its suite key sits beside every registered backend's own.
    assert {"toy_delay_s", *(k for b in backends.registered() for k in b.suite_schema)} <= set(suite["properties"])
    assert "toy" in schema["required"] and schema["properties"]["toy"]["required"] == ["served_by"]
    recipe = _bench(toy_repo, "provenance", "recipe", "--backend", "toy")  # CLI choices come from the registry
    assert recipe.returncode == 0, recipe.stderr
    assert json.loads(recipe.stdout)["sha256"] == provenance.recipe_record("toy", toy_repo)["sha256"]

    plan = _bench(toy_repo, "plan", "--suite", "toy")
    assert plan.returncode == 0, plan.stderr
    assert f"results/runs/{_spec_id(toy_repo)}/toy/tool_history/trial1/run.json" in plan.stdout
    # Its config section is part of the run spec (hashed: it changes the work).
    spec = json.loads(_bench(toy_repo, "plan", "--suite", "toy", "--json").stdout)["spec"]
    assert spec["settings"]["backend_settings"] == {"toy": TOY_SECTION}

    # The toy descriptor's own suite check refuses at DAG time, naming the key.
    bad = snakemake(toy_repo, "-n", "--configfile", str(_config_file(tmp_path / "bad.yaml", scale=0.5)),
                    own_source=True)
    assert bad.returncode != 0
    assert "suites/toy/scale': toy serves at most scale 0.1" in bad.stdout + bad.stderr
    # An unknown backend is refused listing every registered one, the added one included.
    unknown = snakemake(toy_repo, "-n", "--configfile", str(_config_file(tmp_path / "unknown.yaml", backends=["tyo"])),
                        own_source=True)
    assert unknown.returncode != 0
    assert "'tyo' is not one of" in unknown.stdout + unknown.stderr
    assert f"allowed: {', '.join(sorted([*REGISTERED, 'toy']))}" in unknown.stdout + unknown.stderr


def test_a_kubernetes_qualification_offers_the_added_backends_host_hook(toy_repo, tmp_path):
    """The host hook is declared on the toy's descriptor only; the k8s CLI takes it from there."""
    source = tmp_path / "source.json"
    code = ("import json; from rl_pipeline_bench.cli import ROOT, recipe_manifest, source_manifest; "
            "print(json.dumps(dict(source_sha256=source_manifest(), recipe_sha256=recipe_manifest(ROOT))))")
    made = subprocess.run([sys.executable, "-c", code], cwd=toy_repo, env=workflow_env(toy_repo, own_source=True),
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    source.write_text(made.stdout)

    def qualify(*hooks: str) -> subprocess.CompletedProcess:
        args = ["--backend", "toy", "--suite", "toy", "--name", "rl-bench-toy-test",
                "--image", "registry.example.com/rl-bench/toy@sha256:" + "ab" * 32,
                "--source-provenance", str(source), "--output", str(tmp_path / "out"), "--pvc", "bench-data",
                "--cache-subpath", "hf", "--dry-run"]
        for hook in hooks:
            args += ["--host-hook", hook]
        return subprocess.run([sys.executable, str(toy_repo / "scripts" / "qualify_kubernetes.py"), *args],
                              cwd=toy_repo, env=workflow_env(toy_repo, own_source=True), capture_output=True,
                              text=True, timeout=300)

    proc = qualify("toy-pinned-threads")
    assert proc.returncode == 0, proc.stderr
    _configmap, pod = list(yaml.safe_load_all(proc.stdout))
    command = pod["spec"]["containers"][0]["command"]
    assert command[command.index("--host-hook") + 1] == "toy-pinned-threads"
    wrong = qualify("cuda-compat")  # another backend's hook is not the toy's
    assert wrong.returncode == 2 and "backend toy declares only toy-pinned-threads" in wrong.stderr


def test_pipeline_plans_and_runs_the_added_backend(toy_repo):
    dry = snakemake(toy_repo, "-n", "reports/comparison.html", own_source=True)
    assert dry.returncode == 0
    assert "run_benchmark" in scheduled_jobs(dry) and "recipe_hash" in scheduled_jobs(dry)
    # TOY_* variables shape its runs (its descriptor's env_prefixes): the manifest records them.
    proc = snakemake(toy_repo, "reports/comparison.html", own_source=True, extra_env={"TOY_KNOB": "42"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    spec_id = _spec_id(toy_repo)
    storage = json.loads((toy_repo / f"results/probes/{spec_id}/storage.json").read_text())
    assert storage["size_bytes"] == TOY_PROBES["storage"]["size_bytes"]
    run_dir = toy_repo / f"results/runs/{spec_id}/toy/tool_history/trial1"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["valid"], summary["reasons"]
    assert summary["backend"] == "toy" and summary["counts"]["updates"] == 5
    evidence = toy_repo / json.loads((run_dir / "run.json").read_text())["evidence_dir"]
    manifest = json.loads((evidence / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["toy"] == {"updates_served": 5, "served_by": TOY_SECTION["served_by"]}  # its config section
    assert manifest["env"]["TOY_KNOB"] == "42"
    assert "toy-framework" in manifest["host"]["packages"] and "openpipe-art" not in manifest["host"]["packages"]
    assert manifest["recipe_sha256"] == provenance.recipe_record("toy", toy_repo)["sha256"]
    assert json.loads((toy_repo / "results/provenance/recipes/toy.json").read_text())["backend"] == "toy"
    assert "toy" in (toy_repo / "reports/comparison.html").read_text()
