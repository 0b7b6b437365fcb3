"""The `bench` dispatcher: each command imports only its own module; help still lists them all."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

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


def test_seed_one_liner_names_still_import():
    from rl_pipeline_bench.cli import ROOT, recipe_manifest, source_manifest  # noqa: F401

    assert callable(recipe_manifest) and callable(source_manifest)


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
    from rl_pipeline_bench.workflow_launch import suite_of_run

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["run", "--backend", "art", "--workload", "multi_turn", "--gpus", "0,1,2,3"])
    assert suite_of_run(args, {}) == "comparison"
    args = parser.parse_args(["run", "--backend", "reference", "--workload", "multi_turn", "--gpus", "0"])
    assert suite_of_run(args, {}) == "smoke"  # the config's own suite has it
