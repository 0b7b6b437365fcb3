"""The embedded reference backend: a small, honest asynchronous RL pipeline that runs anywhere.

A tiny locally built Qwen3-MoE (rl_pipeline_bench.reference_model) is loaded twice from
its Hugging Face snapshot, once for rollout and once for training. Rollout generates
every planned call at its forced length; the trainer trains a LoRA adapter with a
group-relative policy gradient on a synthetic reward and publishes it in flight, under
a mean-policy-age limit. Evidence v1 is written as the run goes.
"""

from __future__ import annotations


def run(ctx) -> None:
    """Backend entry point (see rl_pipeline_bench.runner.RunContext)."""
    from .pipeline import run as run_pipeline  # torch/transformers load only when a run starts

    run_pipeline(ctx)


def trainer_ranks(suite) -> list[int]:
    """One trainer process, rank 0."""
    return [0]


def preload() -> None:
    """Import torch/transformers/peft before the run's clock starts (the runner calls this)."""
    from . import pipeline  # noqa: F401
