"""Every command in README.md and docs/*.md runs as written, or says here why it is not run.

A *command* is a line of a ```bash block (backslash continuations joined, comments
dropped), a ```python block, or an inline code span that starts with `uv run`, `uv sync`,
`bash`, `sudo`, `rm` or `CI=` (spans such as `bench summarize` name a subcommand in
prose; they are not commands to type). `HOW` classifies each one:

- `run`: run fully, in a copy of the session's smoke pipeline run (tests/conftest.py),
  blocks in document order with the shell state of their block;
- `dry`: a Snakemake command run with `-n` in that copy: the target, `--config` and
  profile are parsed and the jobs planned, nothing executed (a dry run is faithful for
  what breaks as written: argument order, unknown targets, config errors);
- `refused`: a suite this machine cannot run (GPUs, a container engine, the Hub): run
  as written, it must get as far as the workflow's readiness check (before the first job)
  and stop there with its one block naming what is missing (so its arguments parse as
  written), exit 1 — never a usage error or a traceback of its own;
- `elsewhere`: run for real by the named test;
- `skip`: not runnable on a CPU machine without a cluster, or not meant to be run by a
  test, with the reason.

`uv run X` runs X from this test's environment (the venv's bin first on PATH), which is
what `uv run` does in a synced checkout. A command the docs gain or change fails
`test_every_docs_command_is_classified` until it is classified here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from workflow_copy import snakemake, workflow_env  # noqa: E402

from rl_pipeline_bench.paths import ROOT  # noqa: E402

DOCS = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
INLINE = re.compile(r"`((?:uv run|uv sync|bash|sudo|rm|CI=)[^`]*)`")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

CLUSTER = "needs a GPU host or cluster this machine lacks"
HOW: dict[str, tuple[str, str]] = {
    # README: quick start, run specs, statistics
    "uv sync --compile-bytecode": ("skip", "installs the environment these tests run in (.ci/run runs it first)"),
    "uv sync --compile-bytecode --extra eval --extra mlflow": ("skip", "the environment these tests run in"),
    "uv run": ("skip", "the words in prose, not a command"),
    "sudo -E": ("skip", "an option of sudo named in prose"),
    "uv run snakemake --cores 1 reports/comparison.html": ("dry", "the smoke pipeline itself is the session's smoke run"),
    "uv run pytest": ("skip", "the test suite itself"),
    "uv run pytest --fast": ("skip", "the test suite itself (its fast tier)"),
    "uv run pytest --slow": ("skip", "the test suite itself (its slow tier)"),
    "uv run bench plan --suite smoke": ("run", ""),
    "uv run bench plan --configfile my.yaml": ("run", "my.yaml: a smoke override this test writes"),
    "uv run snakemake --cores 1 reports/comparison.html --configfile my.yaml": ("dry", ""),
    "uv run bench spec check results/specs/smoke-*.json": ("run", ""),
    "uv run snakemake --cores 1 reports/comparison.html --config suite=NAME": ("dry", "NAME: smoke"),
    "uv run bench plan --suite NAME": ("run", "NAME: smoke"),
    "uv run bench schema": ("run", ""),
    "uv run python -c 'from rl_pipeline_bench.report.stats import *; s = StatsSettings(); d = describe([1.69, 2.04, "
    "2.27], s); print(d); print(noise_warnings(d[\"n\"], {\"headline trajectories/s\": d[\"cv\"]}, s))'":
        ("run", "its output is checked against the README's"),
    "uv run bench attempts list": ("run", ""),
    "uv run bench attempts seed": ("run", ""),
    # README: re-running a benchmark
    "run=$(uv run bench plan --suite smoke --json | python3 -c 'import json,sys; "
    "print(json.load(sys.stdin)[\"runs\"][0][\"target\"])')": ("run", ""),
    "rm -f \"$run\"": ("run", "removes the run.json of the copy"),
    "uv run snakemake --cores 1 \"$run\" reports/comparison.html": ("dry", "a real re-run takes a minute"),
    "uv run bench run --backend reference --workload multi_turn": (
        "elsewhere", "tests/test_reference_backend.py and every smoke pipeline run it (about a minute)"),
    # README: paper
    "uv run snakemake --cores 1 reports/paper": (
        "elsewhere", "tests/test_paper.py::test_workflow_paper_target_from_retained_evidence"),
    "sudo bash .ci/setup_tex.sh": ("skip", "installs system packages as root (.ci/run runs it)"),
    # README: measured figures and benchmarks (minutes each; their figures are in the README)
    "uv run python benchmarks/bench_smoke.py": ("skip", "a benchmark of a fresh clone, minutes"),
    "uv run python benchmarks/bench_report.py --workdir DIR --repeat 3 --shim-scontrol": (
        "skip", "a benchmark, minutes"),
    "rm -rf reports": ("skip", "part of a timed benchmark recipe (bench_rebuild.py)"),
    "uv run python benchmarks/bench_harness.py": ("skip", "a benchmark, minutes"),
    "uv run python benchmarks/bench_rebuild.py --keep DIR --repeats 5": ("skip", "a benchmark, minutes"),
    "rm -rf reports && snakemake --cores 1 reports/comparison.html": ("skip", "the timed step of bench_rebuild.py"),
    "uv run python benchmarks/bench_headline_window.py": ("skip", "a benchmark, minutes"),
    "python3 benchmarks/bench_decode.py --device cuda --repeats 6 --profile-repeats 2": (
        "skip", "a CUDA benchmark: needs a GPU"),
    "python3 benchmarks/bench_decode.py --device cuda --build-config models/reference_gpu_qwen3_moe.yaml "
    "--repeats 5 --profile-repeats 3 --profile-loops v2-graphed": ("skip", "a CUDA benchmark: needs a GPU"),
    "python3 benchmarks/bench_decode.py --device cuda --loops v2-graphed --repeats 30 --profile-repeats 5": (
        "skip", "a CUDA benchmark: needs a GPU"),
    # README: GPUs, leases, clusters, containers
    "uv run bench gpus": ("skip", "needs NVML (an NVIDIA driver)"),
    "uv run snakemake --cores 1 reports/comparison.html --resources gpu=1 --config suite=reference_gpu": ("dry", ""),
    "uv run bench lease list": ("run", ""),
    "uv run bench lease clear --gpu GPU-UUID --run-id ID": ("skip", "clears a real stale record; tests/test_leases.py"),
    "RL_BENCH_SLURM_PARTITION=gpu RL_BENCH_SLURM_ACCOUNT=myproject uv run snakemake reports/comparison.html "
    "--profile profiles/slurm --config suite=comparison": (
        "refused", "needs a SLURM partition with GPUs (tests/test_slurm.py runs the smoke suite through SLURM)"),
    "uv run python -c 'import json; from rl_pipeline_bench.cli import ROOT, recipe_manifest, source_manifest; "
    "print(json.dumps(dict(source_sha256=source_manifest(), recipe_sha256=recipe_manifest(ROOT))))' > source.json":
        ("run", ""),
    "uv run python scripts/qualify_kubernetes.py --backend art --name rl-bench-art-test --image "
    "REGISTRY/IMAGE@sha256:MANIFEST_DIGEST --source-provenance source.json --output results/kubernetes_art "
    "--context YOUR_CONTEXT --pvc YOUR_PVC --cache-subpath caches/huggingface": (
        "skip", f"{CLUSTER}: a Kubernetes API server (tests/test_kubernetes.py)"),
    "export DOCKER_HOST=unix:///run/podman/podman.sock": ("run", ""),
    "uv run snakemake --cores 1 reports/comparison.html --config suite=smoke_container": ("dry", ""),
    "uv run snakemake --cores 1 reports/comparison.html --resources gpu=4 --config suite=comparison": (
        "refused", "needs four H200s, Docker and the Hub"),
    "uv run bench run --suite comparison --gpus 0,1,2,3": ("refused", "needs four H200s, Docker and the Hub"),
    "uv run bench run --backend art --workload multi_turn --gpus 0,1,2,3": (
        "refused", "needs four H200s, Docker and the Hub"),
    "uv run bench run --suite smoke": ("dry", "the smoke suite runs for real as the session's smoke run"),
    "bash .ci/setup_frameworks.sh": ("skip", "builds the framework venv (minutes; .ci/run)"),
    "uv run pytest tests/frameworks/test_in_framework_env.py -s": (
        "skip", "needs the framework venv of .ci/setup_frameworks.sh"),
    # README: evaluation
    "uv sync --extra eval": ("skip", "changes the environment these tests run in"),
    "sudo apt-get install libosmesa6": ("skip", "installs a system package as root (.ci/setup_eval.sh)"),
    "uv run snakemake --cores 2 reports/comparison.html --config eval_suite=smoke": ("dry", ""),
    "uv run snakemake --cores 2 eval_all --config eval_suite=smoke": ("dry", ""),
    "rm -f results/eval/smoke-HASH/scripted_lift/run1/eval.json": (
        "skip", "a delete-and-ask-again recipe (issue 21 item 1's recipe tests)"),
    "uv run bench eval tasks --suite libero_10": ("run", ""),
    "uv run snakemake --cores 2 eval_all --config eval_suite=libero_smoke": (
        "elsewhere", "tests/test_eval_libero_smoke.py plays it for real (about a minute)"),
    "uv run snakemake --cores 2 reports/comparison.html --config eval_suite=libero_smoke": ("dry", ""),
    "uv run snakemake --cores 8 eval_all --resources gpu=1 --config eval_suite=libero_10 "
    "eval_checkpoint=/ckpt/libero10-rl/actor/global_step_100 "
    "eval_policy_entry_point=my_pkg.openvla:load": ("skip", "placeholders: a user's checkpoint and its loader"),
    "uv run snakemake --cores 8 eval_all --resources gpu=1 --config eval_suite=libero_10 "
    "eval_checkpoints_dir=/ckpt/libero10-rl "
    "eval_policy_entry_point=my_pkg.openvla:load": ("skip", "placeholders: a user's checkpoints and their loader"),
    "uv run python benchmarks/bench_eval_throughput.py": (
        "skip", "a benchmark (real LIBERO episodes, about a minute), not a test; docs/measurements.md"),
    "uv run python benchmarks/bench_eval_throughput.py --cores 8 64": ("skip", "the same benchmark"),
    "uv run pytest -m \"\" tests/test_eval_libero_smoke.py": ("skip", "a test of the slow tier itself"),
    "uv run bench eval checkpoints /ckpt/libero10-rl": ("skip", "placeholder: a user's training directory"),
    # README: probes, MLflow, development
    "uv run snakemake --cores 1 probes": ("dry", ""),
    "uv run bench plan": ("run", ""),
    "uv run bench mlflow export": ("run", ""),
    "uv run snakemake --cores 1 results/mlflow/exported-smoke.json --config eval_suite=smoke": ("dry", ""),
    "uv run snakemake --cores 1 results/mlflow/exported-smoke.json --config mlflow_uri=http://127.0.0.1:5000": (
        "dry", "the server is checked when the export runs (tests/test_mlflow_export.py starts one)"),
    "python: MlflowClient query": ("run", "after `bench mlflow export` in the same copy"),
    "uv run snakemake --lint": ("elsewhere", "test_lint_finds_only_the_documented_kind below"),
    "uv run lint-imports": ("run", ""),
    "uv sync --frozen --compile-bytecode --extra eval --extra mlflow": ("skip", "the environment these tests run in"),
    # docs/
    "uv run --isolated --extra megatron": ("skip", "SkyRL's own scripts' invocation, quoted, not ours"),
    "uv run snakemake --cores 1 reports/comparison.html --config suite=comparison": (
        "refused", "needs four H200s, Docker and the Hub; docs/backends.md had --config before the target"),
    "uv sync --frozen": ("skip", "the environment these tests run in"),
    "uv run snakemake reports/comparison.html --profile profiles/slurm": (
        "dry", "submitting needs a SLURM cluster (tests/test_slurm.py)"),
    "RL_BENCH_K8S_IMAGE=REGISTRY/IMAGE@sha256:DIGEST RL_BENCH_K8S_STORAGE_PREFIX=s3://BUCKET/rl-bench uv run snakemake "
    "reports/comparison.html --profile profiles/kubernetes": (
        "skip", f"{CLUSTER}: a Kubernetes API server and an S3 bucket (even a dry run checks the bucket)"),
    "rm -f results/probes/smoke-*/storage.json": (
        "skip", "a delete-and-ask-again recipe (issue 21 item 1's recipe tests)"),
    "uv run bench plan [--suite NAME] [--configfile FILE ...]": ("skip", "a synopsis, not a command"),
    # README: settings, the report; docs/workflow.md, docs/mlflow.md
    "uv run bench plan --config 'suites={smoke: {trials: 3}}'": ("run", ""),
    "uv run snakemake --cores 1 reports/comparison.html --config 'suites={smoke: {trials: 3}}'": (
        "dry", "three trials of the smoke suite: minutes; the nested value is typed (tests/test_config.py)"),
    "uv run bench report": ("run", "re-renders the copy's report from its records on disk"),
    "uv run snakemake --cores 1 reports/comparison.html --config 'suites={smoke: {trials: 2}}'": (
        "dry", "the measured first run (docs/measurements.md): minutes"),
    "uv sync": ("skip", "the words in prose, not a command"),
    "uv sync --extra mlflow --extra eval": ("skip", "changes the environment these tests run in"),
    "uv run snakemake -n reports/comparison.html --config suite=comparison": (
        "run", "a dry run itself: it must plan the comparison suite on this machine without GPUs"),
}

#: Placeholders a runnable command may hold, and what this test puts in their place.
SUBSTITUTE = {"NAME": "smoke"}
MY_YAML = "suites:\n  smoke:\n    trials: 2\n"


def _commands(text: str):
    """(line, kind, command, block) of one document; block groups a fenced block's commands."""
    fenced = []
    for m in FENCE.finditer(text):
        line0 = text[:m.start()].count("\n") + 2
        lang, body = m.group(1), m.group(2)
        if lang == "python" and "MlflowClient" in body:
            yield line0, "python", "python: MlflowClient query", body
        if lang != "bash":
            continue
        fenced.append(m.span())
        for k, logical in enumerate(re.sub(r"\\\n\s*", " ", body).splitlines()):
            cmd = re.sub(r"\s+#.*$", "", logical).strip()
            if cmd and not cmd.startswith("#"):
                yield line0 + k, "bash", " ".join(cmd.split()), f"block@{line0}"
    prose = list(text)
    for start, end in (m.span() for m in FENCE.finditer(text)):  # output samples, too: no commands in them
        prose[start:end] = [" "] * (end - start)
    prose = "".join(prose)
    for m in INLINE.finditer(prose):
        yield prose[:m.start()].count("\n") + 1, "inline", " ".join(m.group(1).split()), None


def docs_commands():
    for doc in DOCS:
        for line, kind, cmd, block in _commands((ROOT / doc).read_text(encoding="utf-8")):
            yield f"{doc}:{line}", kind, cmd, block


def _how(cmd: str) -> tuple[str, str] | None:
    return HOW.get(cmd)


def test_every_docs_command_is_classified():
    unknown = [f"{where}: {cmd}" for where, _, cmd, _ in docs_commands() if _how(cmd) is None]
    assert unknown == [], "classify these in tests/test_docs_commands.py HOW:\n" + "\n".join(unknown)
    stale = sorted(set(HOW) - {c for _, _, c, _ in docs_commands()})
    assert stale == [], f"HOW lists commands the docs no longer have: {stale}"


def _shell(cmd: str, mode: str) -> str:
    for k, v in SUBSTITUTE.items():
        cmd = re.sub(rf"\b{k}\b", v, cmd)
    cmd = re.sub(r"(^|\s|\$\()uv run ", r"\1", cmd)
    if mode == "dry":
        if re.match(r"(\S+=\S+ )*bench run\b", cmd):
            cmd += " --dry-run"  # bench run's workflow forms: Snakemake's -n
        else:
            cmd = re.sub(r"\bsnakemake\b", "snakemake -n", cmd, count=1)
    return cmd


@pytest.fixture(scope="module")
def docs_copy(smoke_workdir, tmp_path_factory) -> Path:
    """A copy of the smoke run (results, reports and Snakemake's metadata), so nothing here
    changes the session's run."""
    dest = tmp_path_factory.mktemp("docs") / "repo"
    shutil.copytree(smoke_workdir, dest, symlinks=True)
    (dest / "my.yaml").write_text(MY_YAML)
    return dest


def _scripts():
    """Shell scripts in document order: one per fenced block (its run/dry commands, its state
    kept), one per inline command, one per refused command; each with where it is from."""
    blocks: dict[str, list] = {}
    for where, kind, cmd, block in docs_commands():
        mode, _ = _how(cmd) or ("skip", "")
        if mode not in ("run", "dry") or kind == "python":
            if mode == "refused":
                blocks[f"{where} (refused)"] = [(where, _shell(cmd, mode))]
            continue
        blocks.setdefault(block or where, []).append((where, _shell(cmd, mode)))
    return blocks


@pytest.mark.e2e
def test_docs_commands_run(docs_copy):
    env = workflow_env(docs_copy)
    failures, ran = [], 0
    for key, cmds in _scripts().items():
        script = "set -e\n" + "\n".join(c for _, c in cmds)
        proc = subprocess.run(["bash", "-c", script], cwd=docs_copy, env=env, capture_output=True, text=True,
                              timeout=600)
        ran += len(cmds)
        out = proc.stdout + proc.stderr
        if key.endswith("(refused)"):
            if proc.returncode != 1 or "cannot run on this machine; nothing was started:" not in out \
                    or "Traceback" in out:
                failures.append(f"{key}: not stopped by the readiness check (exit {proc.returncode})\n{out[-1500:]}")
            continue
        if proc.returncode != 0:
            failures.append(f"{cmds[0][0]} ({key}): exit {proc.returncode}\n{script}\n{(proc.stdout + proc.stderr)[-1500:]}")
        if "noise_warnings" in script:
            assert "['cv_above_bound: headline trajectories/s CV 14.6% above 5%']" in proc.stdout, proc.stdout
    assert failures == [], "\n\n".join(failures)
    assert ran >= 20, ran


@pytest.mark.e2e
def test_readme_mlflow_query_runs_after_export(docs_copy):
    """The documented Python query (docs/mlflow.md) against the store `bench mlflow export` made in the copy."""
    pytest.importorskip("mlflow")
    block = next(m.group(2) for m in FENCE.finditer((ROOT / "docs" / "mlflow.md").read_text())
                 if "MlflowClient" in m.group(2))
    env = workflow_env(docs_copy)
    subprocess.run(["bench", "mlflow", "export"], cwd=docs_copy, env=env, check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-c", block], cwd=docs_copy, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


LINT_ALLOWED = "Specify a conda environment or container for each rule."


@pytest.mark.workflow
def test_lint_finds_only_the_documented_kind(tmp_path):
    """`snakemake --lint` as docs/development.md says: exit 1, one finding per rule that runs a command,
    all of the one kind it explains; no other finding, no error."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "--cores", "1"], cwd=ROOT,
                          env=workflow_env(ROOT), capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    findings = re.findall(r"^\s*\* (.*?):?$", out, re.M)
    assert proc.returncode == 1, out[-2000:]
    assert findings and set(findings) == {LINT_ALLOWED}, sorted(set(findings))
    assert len(findings) == out.count("Lints for rule "), out[-2000:]
    assert not re.search(r"Traceback|Error|Exception", out), out[-2000:]
    doc = " ".join((ROOT / "docs" / "development.md").read_text().split())
    assert f"`{LINT_ALLOWED}`" in doc
