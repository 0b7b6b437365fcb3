"""The framework kit (backends/framework/): descriptors built from a package's own modules, the driver opening.

These run in the main environment, where neither ART nor SkyRL is installed: that is
the case the opening must name (the driver runs inside its image).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rl_pipeline_bench import backends
from rl_pipeline_bench.backends.context import RunSpecView
from rl_pipeline_bench.backends.framework.backend import PackageEntry
from rl_pipeline_bench.backends.framework.driver import NATIVE_DIR, driver_opening
from rl_pipeline_bench.evidence.store import EvidenceWriter
from rl_pipeline_bench.plan.workloads import spec_plan
from rl_pipeline_bench.records.configfile import ConfigError
from rl_pipeline_bench.backends.context import RunContext
from rl_pipeline_bench.settings.spec import build_spec, check_spec

FRAMEWORKS = [b.name for b in backends.registered() if b.framework]


def _ctx(config, tmp_path, suite: str, backend: str) -> RunContext:
    run_spec = check_spec(build_spec(config, suite))
    workload_spec, plan, _ = spec_plan(run_spec, run_spec.workloads[0])
    writer = EvidenceWriter(tmp_path / "evidence", "run-1", {"backend": backend})
    return RunContext(run_spec, backend, run_spec.workloads[0], workload_spec, 1, plan, {}, writer, {})


def test_the_run_spec_is_what_backends_are_typed_against(config):
    """backends/context.py names RunSpec (a higher layer) through a protocol: the real class fits it."""
    assert isinstance(check_spec(build_spec(config, "smoke")), RunSpecView)
    assert "framework" not in backends.names()  # the kit is not a backend


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_describing_a_framework_backend_loads_none_of_its_run_modules(backend):
    code = ("import sys; from rl_pipeline_bench import backends; d = backends.get(%r); "
            "print(sorted(m for m in sys.modules if m.startswith('rl_pipeline_bench.backends.%s.')))" % (backend, backend))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = eval(proc.stdout)
    assert not [m for m in loaded if m.rsplit(".", 1)[1] in ("driver", "config", "runtimes", "support")], loaded


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_a_framework_backends_entries_are_its_own_modules(backend):
    desc = backends.get(backend)
    assert desc.packages[0] == desc.framework
    for entry in (desc.run, desc.native_support):
        assert isinstance(entry, PackageEntry) and entry.package == f"rl_pipeline_bench.backends.{backend}"
        assert callable(entry.resolve())


def test_an_entry_that_is_not_module_colon_function_is_refused():
    with pytest.raises(ValueError, match="'driver.run' is not 'module:function'"):
        PackageEntry("rl_pipeline_bench.backends.art", "driver.run")


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_the_opening_refuses_the_suite_before_any_framework_import(config, tmp_path, backend):
    ctx = _ctx(config, tmp_path, "smoke", backend)
    imported = []
    with pytest.raises(ConfigError, match=rf"suite 'smoke' cannot run {backend}"):
        with driver_opening(ctx, backend):
            imported.append(True)
    assert not imported and not (ctx.writer.path / NATIVE_DIR).exists()


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_a_framework_missing_here_is_named_with_the_image_it_runs_in(config, tmp_path, backend):
    """The comparison suite passes preflight; the driver's framework import fails in this environment."""
    ctx = _ctx(config, tmp_path, "comparison", backend)
    framework = backends.get(backend).framework
    with pytest.raises(RuntimeError, match=rf"the {backend} driver runs inside the {backend} image; "
                                           rf"{framework} is not importable here"):
        backends.get(backend).run(ctx)
    assert not (ctx.writer.path / NATIVE_DIR).exists()


def test_the_native_directory_exists_once_the_opening_has_run(config, tmp_path):
    ctx = _ctx(config, tmp_path, "comparison", "art")
    with driver_opening(ctx, "art") as opened:
        import json  # noqa: F401  (a framework import that succeeds)
    assert opened.native_dir == ctx.writer.path / NATIVE_DIR and opened.native_dir.is_dir()
    assert opened.n == ctx.run_spec.trained_updates and opened.framework == "openpipe-art"
