"""The embedded reference backend: a small, honest asynchronous RL pipeline that runs anywhere.

A tiny locally built Qwen3-MoE (rl_pipeline_bench.models.reference) is loaded twice from
its Hugging Face snapshot, once for rollout and once for training. Rollout generates
every planned call at its forced length; the trainer trains a LoRA adapter with a
group-relative policy gradient on a synthetic reward and publishes it in flight, under
a mean-policy-age limit. Evidence v1 is written as the run goes.
"""

from __future__ import annotations

from ..descriptor import Backend

#: The top-level `reference:` section of config.yaml.
CONFIG_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "description": "Reference backend settings (the embedded, runs-anywhere pipeline).",
    "properties": {
        "lora_rank": {"type": "integer", "minimum": 1, "maximum": 4096},
        "lora_alpha": {"type": "number", "exclusiveMinimum": 0},
        "max_policy_age": {"type": "integer", "minimum": 0, "maximum": 1000},
        "learning_rate": {"type": "number", "exclusiveMinimum": 0},
        "torch_threads": {"type": "integer", "minimum": 1, "maximum": 1024},
        "decode_batch_rows": {"type": "integer", "minimum": 1, "maximum": 65536,
                              "description": "most calls the rollout decodes in one batch (default 64)"},
        "decode_loop": {"enum": ["auto", "graphed", "static", "eager"],
                        "description": "auto: a CUDA graph of the decode step on CUDA, the eager loop on CPU"},
    },
}


def run(ctx) -> None:
    """Backend entry point (see rl_pipeline_bench.backends.context.RunContext)."""
    from .pipeline import run as run_pipeline  # torch/transformers load only when a run starts

    run_pipeline(ctx)


def trainer_ranks(spec) -> list[int]:
    """One trainer process, rank 0."""
    return [0]


def staleness_limit(spec) -> int:
    """Versions the rollout may run ahead of the trainer (`reference.max_policy_age`)."""
    return int(spec.backend_settings("reference")["max_policy_age"])


def preload() -> None:
    """Import torch/transformers/peft before the run's clock starts (the runner calls this)."""
    from . import pipeline  # noqa: F401


BACKEND = Backend(
    name="reference",
    summary="embedded asynchronous RL pipeline on a tiny Qwen3-MoE (CPU or CUDA, any machine)",
    run=run,
    trainer_ranks=trainer_ranks,
    staleness_limit=staleness_limit,
    config_schema=CONFIG_SCHEMA,
    preload=preload,
)
