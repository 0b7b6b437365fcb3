"""Whether every call of the offered plan fits the model's context, checked for every backend before any lease.

A call's prompt is the whole conversation so far (plan.render): system (tool schema and
salt), user prompt, the historical turns, then every earlier new call's completion and
observation; the call then generates its forced completion. Its length is that content
plus the chat template's own tokens, counted here as at most TEMPLATE_TOKENS_PER_MESSAGE
per message (the ChatML templates of the embedded models and Qwen3.5 use 5 or fewer, and
the generation prompt a few more). A plan with a call longer than the model's context
would run out of positions (or memory) mid-run, so the suite checks refuse it by name.

The model's context comes from what the run spec can read before a download: a local
model's build config (`model.max_position_embeddings`, and the tokenizer's
`model_max_length` when smaller). A hub model's context is not known until its snapshot
is on disk; the check says nothing for it (it does not guess).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

#: Template tokens a message may add around its content (role markers, separators).
TEMPLATE_TOKENS_PER_MESSAGE = 8


def model_context(model: dict[str, Any]) -> int | None:
    """Positions the spec's model takes, where the spec can say before a download (None: unknown)."""
    from ..models.reference import load_build_config

    if model.get("source") != "local" or not model.get("build_config"):
        return None
    cfg = load_build_config(Path(model["build_config"]))
    limits = [cfg["model"].get("max_position_embeddings"), cfg["tokenizer"].get("model_max_length")]
    known = [int(x) for x in limits if x]
    return min(known) if known else None


def call_lengths(plan: pd.DataFrame, salt_tokens: int) -> pd.DataFrame:
    """Plan rows with `content_tokens` (prompt content + forced completion) and `call_tokens` (with the template)."""
    df = plan.sort_values(["update", "group", "trajectory", "call"]).reset_index(drop=True)
    fixed = (df["prompt_tokens"] + df["tool_schema_tokens"] + df["history_completion_tokens"].map(sum)
             + df["history_observation_tokens"].map(sum) + (df["salt"] != "").astype(int) * salt_tokens)
    turn = df["forced_completion_tokens"] + df["tool_observation_tokens"]
    earlier = turn.groupby([df["update"], df["group"], df["trajectory"]]).cumsum() - turn
    df["content_tokens"] = fixed + earlier + df["forced_completion_tokens"]
    system = ((df["tool_schema_tokens"] > 0) | (df["salt"] != "")).astype(int)
    messages = system + 1 + 2 * df["history_completion_tokens"].map(len) + 2 * df["call"] + 1
    df["call_tokens"] = df["content_tokens"] + messages * TEMPLATE_TOKENS_PER_MESSAGE
    return df


def problems(spec: Any, backend: str) -> list[str]:
    """One reason per workload whose longest call exceeds the model's context (empty: every call fits)."""
    from ..plan.call_identity import call_label
    from ..plan.render import SALT_TOKENS
    from ..plan.workloads import spec_plan

    context = model_context(spec.model)
    if context is None:
        return []
    out = []
    for name in spec.workloads:
        _, plan, _ = spec_plan(spec, name)
        lengths = call_lengths(plan, SALT_TOKENS)
        row = lengths.loc[lengths["call_tokens"].idxmax()]
        if int(row["call_tokens"]) > context:
            scale = spec.settings["workload_scale"][name]
            out.append(
                f"config key 'suites/{spec.suite_name}/workload_scale': {backend} on {name} at scale {scale}: "
                f"{call_label(row['update'], row['group'], row['trajectory'], row['call'])} needs "
                f"{int(row['call_tokens'])} tokens ({int(row['content_tokens'])} of content and forced completion, "
                f"plus at most {TEMPLATE_TOKENS_PER_MESSAGE} template tokens a message), but model "
                f"'{spec.model.get('name')}' takes {context} (max_position_embeddings / model_max_length of "
                f"{spec.model.get('build_config')}); lower the scale or give the model a longer context")
    return out
