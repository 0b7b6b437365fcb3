"""Every backend's suite checks refuse a plan whose longest call does not fit the model's context."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rl_pipeline_bench import backends
from rl_pipeline_bench.backends import context_fit
from rl_pipeline_bench.backends.suite_checks import preflight, suite_problems
from rl_pipeline_bench.plan.render import SALT_TOKENS
from rl_pipeline_bench.plan.workloads import spec_plan
from rl_pipeline_bench.records.configfile import ConfigError
from rl_pipeline_bench.settings.spec import build_spec, check_spec

REPO = Path(__file__).resolve().parents[1]


def _short_context_model(config, tmp_path, positions: int) -> None:
    """reference_gpu's model with a build config of `positions` positions."""
    cfg = yaml.safe_load((REPO / "models" / "reference_gpu_qwen3_moe.yaml").read_text())
    cfg["model"]["max_position_embeddings"] = positions
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(cfg))
    config["models"]["reference-gpu-qwen3moe"]["build_config"] = str(path)


def test_the_shipped_suites_fit_their_models(config):
    for suite in ("smoke", "reference_gpu"):
        spec = check_spec(build_spec(config, suite))
        for backend in spec.backends:
            assert context_fit.problems(spec, backend) == []


@pytest.mark.parametrize("backend", backends.names())
def test_a_call_longer_than_the_context_is_refused_by_name_for_every_backend(config, tmp_path, backend):
    _short_context_model(config, tmp_path, 16384)  # what reference_gpu's model had before
    spec = check_spec(build_spec(config, "reference_gpu"))
    found = [p for p in context_fit.problems(spec, backend)]
    assert len(found) == 1, found  # tool_history alone, at scale 1.0
    text = found[0]
    assert "tool_history at scale 1.0" in text and "takes 16384" in text and backend in text
    _, plan, _ = spec_plan(spec, "tool_history")
    longest = context_fit.call_lengths(plan, SALT_TOKENS).sort_values("call_tokens").iloc[-1]
    assert f"needs {int(longest['call_tokens'])} tokens" in text
    assert (f"update {int(longest['update'])} group {int(longest['group'])} trajectory {int(longest['trajectory'])} "
            f"call {int(longest['call'])}") in text
    assert text in suite_problems(spec, backend)


def test_preflight_refuses_before_any_lease(config, tmp_path):
    _short_context_model(config, tmp_path, 16384)
    spec = check_spec(build_spec(config, "reference_gpu"))
    with pytest.raises(ConfigError, match="tool_history at scale 1.0: update .* needs 34101 tokens"):
        preflight(spec, "reference")


def test_call_lengths_add_up_the_conversation_so_far():
    import pandas as pd

    plan = pd.DataFrame([
        {"workload": "w", "update": 1, "group": 0, "trajectory": 0, "call": c, "prompt_tokens": 100,
         "tool_schema_tokens": 50, "history_completion_tokens": [10, 20], "history_observation_tokens": [5, 5],
         "forced_completion_tokens": f, "tool_observation_tokens": o, "salt": "ab"}
        for c, (f, o) in enumerate([(30, 7), (40, 9), (60, 0)])])
    got = context_fit.call_lengths(plan, salt_tokens=8)
    fixed = 100 + 50 + 30 + 10 + 8
    assert got["content_tokens"].tolist() == [fixed + 30, fixed + 37 + 40, fixed + 37 + 49 + 60]
    per = context_fit.TEMPLATE_TOKENS_PER_MESSAGE
    # system, user, two historical pairs, the earlier calls' pairs, the call being generated
    assert (got["call_tokens"] - got["content_tokens"]).tolist() == [7 * per, 9 * per, 11 * per]


def test_a_hub_model_of_unknown_context_is_not_guessed(config):
    spec = check_spec(build_spec(config, "comparison"))
    assert context_fit.model_context(spec.model) is None
    assert context_fit.problems(spec, "art") == []
