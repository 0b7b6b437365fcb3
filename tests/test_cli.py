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
