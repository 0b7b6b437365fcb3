"""`bench preflight` asks the framework whether it can express the contract, before any lease.

Here (the project's environment) neither framework is installed, so the preflight must
refuse with one clear error; the framework venv tests (tests/frameworks/) show a real
older release refused setting by setting and the current releases accepted.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rl_pipeline_bench import backends
from rl_pipeline_bench.settings.spec import build_spec, check_spec
from rl_pipeline_bench.backends.framework.support import SupportError, refuse_gaps


#: (backend, framework distribution) of every registered framework backend.
FRAMEWORKS = [(b.name, b.framework) for b in backends.registered() if b.framework]


def test_the_framework_backends_are_registered():
    assert {("art", "openpipe-art"), ("skyrl", "skyrl")} <= set(FRAMEWORKS)


@pytest.mark.parametrize("backend, framework", FRAMEWORKS)
def test_preflight_refuses_a_framework_that_is_not_there(backend, framework):
    proc = subprocess.run([sys.executable, "-m", "rl_pipeline_bench.cli", "preflight", "--suite", "comparison",
                           "--backend", backend, "--runtime", "native"],
                          capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "RL_BENCH_ENV_ROOT": ""})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"installed no {framework}" in proc.stderr and f"installed: {framework} is not installed" in proc.stderr


def test_framework_backends_describe_what_preflight_asks(config):
    spec = check_spec(build_spec(config, "comparison"))
    for name, _ in FRAMEWORKS:
        native = backends.get(name).native_support(spec)
        assert native and isinstance(native, dict)
    assert backends.get("reference").native_support is None


def test_refusal_names_every_gap():
    answer = {"framework": "fw", "version": "1.0", "checked_in": "image x",
              "gaps": {"lora": "LoRA setting: TypeError", "cleanup": "close(): missing"}}
    with pytest.raises(SupportError) as err:
        refuse_gaps("art", answer)
    text = str(err.value)
    assert "installed fw 1.0 (image x)" in text and "  lora: LoRA setting: TypeError" in text
    assert "  cleanup: close(): missing" in text
    refuse_gaps("art", {**answer, "gaps": {}})  # no gaps: no error
