"""The `bench` dispatcher: each command imports only its own module; help still lists them all."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from rl_pipeline_bench import cli


def _registered(module: str) -> set[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(f"rl_pipeline_bench.commands.{module}").register(sub)
    return set(sub.choices)


def test_command_table_matches_what_the_modules_register():
    modules = cli.command_modules()
    by_module = {m: _registered(m) for m in modules}
    assert set().union(*by_module.values()) == set(cli.COMMAND_MODULES)
    for module, names in by_module.items():
        assert {n for n, m in cli.COMMAND_MODULES.items() if m == module} == names, module


def test_a_command_loads_only_its_module_and_no_heavy_dependency():
    code = ("import sys; from rl_pipeline_bench import cli; cli.build_parser(['summarize', 'x']); "
            "print(sorted(m for m in sys.modules if m.startswith(('rl_pipeline_bench.commands.', 'jsonschema', "
            "'pandas', 'rl_pipeline_bench.leases', 'rl_pipeline_bench.provenance'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['rl_pipeline_bench.commands.summarize']"


def test_help_and_unknown_commands_list_every_command(capsys):
    try:
        cli.main(["no-such-command"])
    except SystemExit as exc:
        assert exc.code == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and all(name in err for name in cli.COMMAND_MODULES)


def _command_paths(parser: argparse.ArgumentParser, path: tuple = ()):
    """Every command and action of the parser tree, as the words a user types before --help."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _command_paths(sub, (*path, name))


@pytest.mark.parametrize("words", [" ".join(p) for p in _command_paths(cli.build_parser()) if p])
def test_every_command_has_help(words, capsys):
    """`bench write-plan --help` once crashed (a Path given as help text); every command's help is asked here."""
    with pytest.raises(SystemExit) as exc:
        cli.main([*words.split(), "--help"])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    assert out.out.startswith(f"usage: bench {words}") and not out.err, out


def test_seed_one_liner_names_still_import():
    from rl_pipeline_bench.cli import ROOT, recipe_manifest, source_manifest  # noqa: F401

    assert callable(recipe_manifest) and callable(source_manifest)


# --------------------------------------------------------------------------- one error handler

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402


BENCH = str(Path(sys.executable).parent / "bench")


def _bench(args: list[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([BENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **env), stdin=subprocess.DEVNULL)


@pytest.fixture
def bad_inputs(tmp_path) -> Path:
    (tmp_path / "bad.json").write_text("not json")
    (tmp_path / "nan.json").write_text('{"schema": "rl-bench/run-spec/v1", "id": "x", "hash": "y", '
                                       '"settings": {"suite": "smoke", "trials": NaN}}')
    (tmp_path / "dir").mkdir()
    (tmp_path / "evidence_int.json").write_text('{"evidence_dir": 5}')
    return tmp_path


#: Bad input to each area's commands; every one used to end in a traceback (or two) or a non-error exit.
BAD_CALLS = {
    "report-missing-summary": ["report", "--summaries", "/nonexistent", "--plans", "/nonexistent", "--suite", "smoke"],
    "summarize-run-not-json": ["summarize-run", "bad.json", "-o", "out.json"],
    "spec-check-nan": ["spec", "check", "nan.json"],
    "plan-nan-configfile": ["plan", "--configfile", "nan.json"],
    "probe-flops-not-json": ["probe", "model-flops", "--model-record", "bad.json"],
    "probe-summarize-run-missing": ["probe", "summarize-run", "/nonexistent", "--output", "o.json"],
    "mlflow-summary-not-json": ["mlflow", "export", "--summaries", "bad.json", "--uri", "sqlite:///dir/x.db"],
    "schema-missing": ["schema", "--schema", "/nonexistent"],
    "attempts-index-is-dir": ["attempts", "list", "--index", "dir"],
    "eval-spec-settings-not-json": ["eval", "spec", "--suite", "smoke", "--settings-json", "{"],
    "write-plan-nan-spec": ["write-plan", "--spec", "nan.json", "--workload", "multi_turn", "--output", "o.parquet"],
    "lease-slurm-superscript": ["lease", "run", "--gpus", "0", "--count", "1", "--", "true"],
    "summarize-run-evidence-dir-int": ["summarize-run", "evidence_int.json", "-o", "out.json"],
    "probe-storage-negative-size": ["probe", "storage", "--size-bytes", "-5", "--output", "o.json"],
    "probe-allreduce-nan-timeout": ["probe", "allreduce", "--iters", "0", "--timeout", "nan", "--output", "o.json"],
    "eval-checkpoints-missing": ["eval", "checkpoints", "/nonexistent"],
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_every_command_fails_with_one_line_and_exit_2(bad_inputs, name):
    env = {"SLURM_JOB_ID": "1", "SLURM_JOB_GPUS": "\u00b2"} if name.startswith("lease") else {}
    proc = _bench(BAD_CALLS[name], bad_inputs, **env)
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"bench {BAD_CALLS[name][0]}"), lines[0]
    expected = 75 if name.startswith("lease") else 2  # a refused lease keeps the lease's own code
    assert proc.returncode == expected, proc.stderr


def test_debug_adds_the_traceback(bad_inputs):
    proc = _bench(["--debug", *BAD_CALLS["report-missing-summary"]], bad_inputs)
    assert proc.returncode == 2 and "Traceback" in proc.stderr and proc.stderr.count("Traceback") == 1
    assert proc.stderr.strip().splitlines()[-1] == "bench report: summary /nonexistent does not exist"


def test_a_usage_error_is_not_redacted(tmp_path):
    proc = _bench(["plan", "--config", "nonsense"], tmp_path)
    assert proc.returncode == 2 and "<redacted>" not in proc.stderr and "'nonsense'" in proc.stderr, proc.stderr
    secret = _bench(["plan", "--config", "api_key=sk-" + "a" * 30, "x"], tmp_path)
    assert "sk-aaaa" not in secret.stderr  # values shaped like secrets are still scrubbed


@pytest.mark.parametrize("args", [["schema"], ["plan"]])
def test_a_closed_pipe_is_not_a_traceback(tmp_path, args):
    proc = subprocess.Popen([BENCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()  # the reader went away before anything was written (`bench schema | head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "BrokenPipe" not in err and "Traceback" not in err, err


def test_ctrl_c_is_exit_130_without_traceback(tmp_path):
    code = ("import sys, time; from rl_pipeline_bench import cli; import rl_pipeline_bench.commands.schema as s\n"
            "def slow(args):\n    print('ready', flush=True); time.sleep(60)\n"
            "s.cmd_schema = slow\nsys.exit(cli.main(['schema']))")
    # A pytest started with SIGINT ignored (nohup, `&` in a script, some CI runners) passes that on, and
    # Python then installs no KeyboardInterrupt handler: the child gets the terminal's default, as a user's shell gives.
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err


@pytest.mark.parametrize("args", [["spec", "check", "fifo"], ["plan", "--spec", "fifo"],
                                  ["attempts", "list", "--index", "fifo"], ["summarize-run", "fifo", "-o", "o.json"],
                                  ["report", "--summaries", "fifo", "--plans", "p", "--suite", "smoke"],
                                  ["plan", "--configfile", "fifo"]],
                         ids=["spec-check", "plan-spec", "attempts-list", "summarize-run", "report", "plan-config"])
def test_a_fifo_is_refused_not_read(tmp_path, args):
    """Reading a FIFO nobody writes blocks forever; every reader refuses one by name."""
    os.mkfifo(tmp_path / "fifo")
    proc = _bench(args, tmp_path)  # the 120 s timeout of _bench fails the test on a hang
    assert proc.returncode == 2 and "fifo is not a regular file" in proc.stderr, proc.stderr


def test_mlflow_export_to_a_directory_store_fails_at_once(tmp_path):
    (tmp_path / "results").mkdir()
    started = time.monotonic()
    proc = _bench(["mlflow", "export", "--results", "results", "--uri", f"sqlite:///{tmp_path}"], tmp_path)
    assert time.monotonic() - started < 30  # MLflow itself retried such a store for more than 90 s
    assert proc.returncode == 2 and "is not a regular file" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args", [["attempts", "seed", "--evidence-root", "missing", "--output", "o.jsonl"],
                                  ["mlflow", "export", "--results", "missing"]], ids=["attempts-seed", "mlflow"])
def test_a_missing_input_directory_is_an_error(tmp_path, args):
    proc = _bench(args, tmp_path)  # (a relative path: the code before this fix created missing/mlflow/)
    assert proc.returncode == 2 and "missing" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "missing").exists()


def test_report_statistics_options_are_checked_like_the_config_keys(tmp_path):
    proc = _bench(["report", "--cv-bound", "nan", "--bootstrap-resamples", "-5", "--confidence", "7",
                   "--min-trials", "-3", "--suite", "smoke", "--summaries", "s.json", "--plans", "p.parquet"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    for words in ("--cv-bound nan: not a finite number", "--min-trials -3", "--confidence 7.0",
                  "--bootstrap-resamples -5"):
        assert words in proc.stderr, proc.stderr


def test_a_negative_memory_threshold_is_refused_as_such(tmp_path):
    proc = _bench(["lease", "run", "--gpus", "0", "--count", "1", "--memory-threshold-mib", "-5", "--", "true"],
                  tmp_path, RL_BENCH_LOCK_DIR=str(tmp_path / "locks"))
    assert proc.returncode == 75 and "--memory-threshold-mib -5: -5 is less than the minimum of 0" in proc.stderr, \
        proc.stderr


# TEST DOUBLES (labelled): this machine has the eval and mlflow extras installed; hiding their
# modules in a child interpreter stands in for a machine without them.
_WITHOUT = {
    "eval": ("import importlib.util; real = importlib.util.find_spec; "
             "importlib.util.find_spec = lambda n, *a: None if n.split('.')[0] in ('libero', 'robosuite', 'mujoco') "
             "else real(n, *a); sys.modules['libero'] = None"),
    "mlflow": "sys.modules['mlflow'] = None; sys.modules['mlflow.tracking'] = None",
}


@pytest.mark.parametrize("extra, argv, hint", [
    ("eval", ["eval", "tasks", "--suite", "libero_10"], "uv sync --extra eval"),
    ("mlflow", ["mlflow", "export", "--results", "results"], "uv sync --extra mlflow"),
])
def test_a_missing_extra_is_one_line_with_the_install_hint(tmp_path, extra, argv, hint):
    (tmp_path / "results").mkdir()
    code = f"import sys; {_WITHOUT[extra]}\nfrom rl_pipeline_bench import cli; sys.exit(cli.main({argv!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and hint in lines[0], proc.stderr


def test_build_failure_is_printed_once(tmp_path):
    proc = _bench(["build", "--backend", "art"], tmp_path, DOCKER_HOST=f"unix://{tmp_path}/no.sock")
    assert proc.returncode == 1 and (proc.stdout + proc.stderr).count("bench build:") == 1, proc.stdout + proc.stderr


def test_gpus_without_nvml_says_what_that_means_here(tmp_path):
    proc = _bench(["gpus"], tmp_path)
    if proc.returncode == 0:
        pytest.skip("NVML answers on this machine")
    assert "no NVIDIA driver here" in proc.stderr and "CPU suites" in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- the original launcher's `bench run` forms

def test_bench_run_forms_that_cannot_work_say_so_in_one_line(capsys):
    cases = [
        (["run", "--backend", "reference"], "give both --backend and --workload (one run), or neither"),
        (["run", "--suite", "smoke", "--gpus", "0"], "suite smoke runs on CPU (gpus: 0): drop --gpus"),
        (["run", "--suite", "reference_gpu", "--backend", "reference", "--workload", "multi_turn", "--gpus", "0,1"],
         "--gpus 0,1 names 2 distinct device(s); suite reference_gpu runs on 1"),
        (["run", "--suite", "comparison", "--gpus", "0,1,2,2"], "names 3 distinct device(s); suite comparison runs on 4"),
        (["run", "--suite", "smoke", "--run-json", "x.json"], "--run-json apply to a direct run"),
    ]
    for argv, message in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (argv, err)


def test_bench_run_with_gpus_is_the_workflows_run_under_its_lease_on_that_set(tmp_path):
    """`bench run --backend B --workload W --gpus SET` asks Snakemake for that run's records; the GPU set becomes
    the suite's gpu_sets, so the run rule's own lease takes it (dry run: nothing runs)."""
    from workflow_copy import copy_repo, workflow_env

    workdir = copy_repo(tmp_path / "repo")
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--suite", "reference_gpu",
                           "--backend", "reference", "--workload", "multi_turn", "--gpus", "1", "--dry-run"],
                          cwd=workdir, env=workflow_env(workdir), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bench: snakemake --cores 1 results/runs/reference_gpu-" in proc.stderr
    assert "'suites={reference_gpu: {gpu_sets: [\"1\"]}}' --resources gpu=1 --dry-run" in proc.stderr
    commands = [line for line in proc.stdout.splitlines() if "bench run --spec" in line]
    assert len(commands) == 1 and "bench lease run --gpus 1 --count 1 --run-id reference_gpu-" in commands[0]
    assert "--workload multi_turn --trial 1" in commands[0]
    assert not (workdir / "results/evidence").exists()


def test_a_run_without_suite_belongs_to_the_one_suite_that_has_it():
    from rl_pipeline_bench.commands.run import register
    from rl_pipeline_bench.runs.workflow_launch import suite_of_run

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["run", "--backend", "art", "--workload", "multi_turn", "--gpus", "0,1,2,3"])
    assert suite_of_run(args, {}) == "comparison"
    args = parser.parse_args(["run", "--backend", "reference", "--workload", "multi_turn", "--gpus", "0"])
    assert suite_of_run(args, {}) == "smoke"  # the config's own suite has it
