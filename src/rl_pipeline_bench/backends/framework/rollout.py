"""Shared OpenAI-compatible rollout: one workload-plan trajectory becomes chat requests.

Both framework drivers (ART, SkyRL) send the same requests for the same plan rows:
the rendered messages (render.py), the forced completion length as
`max_tokens = min_tokens = forced` with `ignore_eos`, and the chat-template
defaults `enable_thinking=False` / `preserve_thinking=True`. Per-request options
are merged into the defaults one level deep, so adding `min_tokens` never drops
`chat_template_kwargs` (the same rule ART's own OpenAI client proxy applies).
Every response's completion length is checked against the plan; a mismatch raises.

Offered work beyond the last trained update: a run's plan holds the N trained updates
plus `extra_offered_updates` more (rl_pipeline_bench.settings.spec), so generation keeps going
through the headline window instead of draining. A driver offers all of it, trains
only updates 1..N, and records every call of a later update as not accepted
(`evidence_rows`); the contract never counts them.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ...plan.render import render_messages
from ...plan.call_identity import call_label

#: Chat-template options the measurement contract asks both backends to send.
CHAT_TEMPLATE_KWARGS: dict[str, bool] = {"enable_thinking": False, "preserve_thinking": True}


def default_extra_body() -> dict[str, Any]:
    """Per-request defaults every chat request carries unless the client adds them itself."""
    return {"chat_template_kwargs": dict(CHAT_TEMPLATE_KWARGS)}


class CompletionLengthError(RuntimeError):
    """A response's completion length differs from the plan's forced length."""


def merge_extra_body(defaults: Mapping[str, Any] | None, provided: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge per-request options into defaults; nested dicts merge key by key.

    A provided nested dict (e.g. a partial `chat_template_kwargs`) extends the
    default one instead of replacing it; other provided values win.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(defaults or {}))
    for key, value in (provided or {}).items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **copy.deepcopy(dict(value))}
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def forced_length_options(forced: int) -> dict[str, Any]:
    """vLLM sampling extras that make a completion exactly `forced` tokens long."""
    forced = int(forced)
    if forced < 1:
        raise ValueError(f"forced completion length must be >= 1, got {forced}")
    return {"min_tokens": forced, "ignore_eos": True}


def build_chat_request(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    forced: int,
    *,
    template_defaults: Mapping[str, Any] | None = None,
    extra_body: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create(**request)`.

    template_defaults: the defaults to merge under the per-request options;
    pass None when the client merges its own defaults (ART's managed client).
    extra_body: further per-request options (e.g. SkyRL's `return_token_ids`).
    """
    per_request = merge_extra_body(forced_length_options(forced), extra_body)
    request: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": int(forced),
        "extra_body": merge_extra_body(template_defaults, per_request),
    }
    if tools:
        request["tools"] = tools
    return request


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def completion_tokens_of(response: Any) -> int:
    """The server-reported completion length of a chat completion response."""
    usage = _get(response, "usage")
    n = _get(usage, "completion_tokens") if usage is not None else None
    if n is None:
        raise CompletionLengthError("response carries no usage.completion_tokens; cannot check the forced length")
    return int(n)


def check_completion(response: Any, forced: int, where: str = "") -> int:
    """Return the completion length; raise CompletionLengthError when it is not `forced`."""
    n = completion_tokens_of(response)
    if n != int(forced):
        raise CompletionLengthError(
            f"completion length {n} != forced {int(forced)}{f' ({where})' if where else ''}; "
            "the inference server ignored min_tokens/max_tokens/ignore_eos"
        )
    return n


def synthetic_reward(trajectory: int, group_size: int) -> float:
    """Deterministic reward in [0, 1] that differs inside a group.

    The workloads are systems benchmarks, not tasks; rewards only need
    within-group variance so native zero-variance filters keep every group.
    """
    return 0.0 if group_size <= 1 else int(trajectory) / (int(group_size) - 1)


@dataclass
class CallRecord:
    """One model call, in calls.parquet's columns (plus `update`)."""

    update: int
    group: int
    trajectory: int
    call: int
    prompt_tokens: int
    forced_completion_tokens: int
    completion_tokens: int
    accepted: bool
    started_at: float
    finished_at: float
    policy_version: int

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def accepted_for_update(update: int, trained_updates: int) -> bool:
    """Whether calls of this plan update can be accepted: only updates 1..N are trained."""
    return 1 <= int(update) <= int(trained_updates)


def evidence_rows(calls: Sequence[CallRecord], trained_updates: int) -> list[dict[str, Any]]:
    """calls.parquet rows of a trajectory's calls; calls of extra offered updates are not accepted."""
    rows = []
    for c in calls:
        row = c.as_row()
        row["accepted"] = bool(row["accepted"]) and accepted_for_update(c.update, trained_updates)
        rows.append(row)
    return rows


@dataclass
class TrajectoryResult:
    """What one plan trajectory produced through the chat endpoint."""

    key: tuple[int, int, int]
    calls: list[CallRecord]
    responses: list[Any]
    #: rendered messages with each new assistant turn replaced by its response choice,
    #: in conversation order (the shape ART's Trajectory.messages_and_choices takes).
    messages_and_choices: list[Any] = field(default_factory=list)
    #: per call: the rendered prompt messages sent for that call.
    prompts: list[list[dict[str, Any]]] = field(default_factory=list)


def _choice_text(choice: Any) -> str:
    message = _get(choice, "message")
    content = _get(message, "content") if message is not None else None
    if content is None:
        raise CompletionLengthError("response choice has no message content")
    return str(content)


async def run_trajectory(
    create: Callable[..., Awaitable[Any]],
    model: str,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]] | Any,
    *,
    clock: Callable[[], float],
    policy_version: Callable[[], int] = lambda: 0,
    template_defaults: Mapping[str, Any] | None = None,
    extra_body: Mapping[str, Any] | None = None,
    on_call: Callable[[CallRecord], None] | None = None,
) -> TrajectoryResult:
    """Send a trajectory's new calls in order; check each response's length.

    create: the chat-completions `create` coroutine (a native client's).
    rows: that trajectory's plan rows (DataFrame or dicts), calls 0..K-1.
    on_call: told each answered call as soon as it is answered, before its length is
        checked (a call of another length is told with accepted=False, then raises), so a
        trajectory that fails part way still leaves its answered calls as evidence.
    The prompt of call k holds the text call j<k produced, then its tool observation.
    """
    records = rows.to_dict("records") if hasattr(rows, "to_dict") else [dict(r) for r in rows]
    records.sort(key=lambda r: int(r["call"]))
    if not records:
        raise ValueError("run_trajectory needs at least one plan row")
    first = records[0]
    key = (int(first["update"]), int(first["group"]), int(first["trajectory"]))
    previous: list[str] = []
    result = TrajectoryResult(key=key, calls=[], responses=[])
    prev_messages: list[dict[str, Any]] | None = None
    for row in records:
        call = int(row["call"])
        messages, tools = render_messages(tokenizer, records, call, previous)
        forced = int(row["forced_completion_tokens"])
        request = build_chat_request(
            model, messages, tools, forced, template_defaults=template_defaults, extra_body=extra_body
        )
        version = int(policy_version())
        started = clock()
        response = await create(**request)
        finished = clock()
        n = completion_tokens_of(response)
        record = CallRecord(
            update=key[0], group=key[1], trajectory=key[2], call=call,
            prompt_tokens=int(row["prompt_tokens"]), forced_completion_tokens=forced,
            completion_tokens=n, accepted=n == forced, started_at=started, finished_at=finished,
            policy_version=version,
        )
        if on_call is not None:
            on_call(record)
        check_completion(response, forced, where=call_label(*key[:3], call))
        choice = _get(response, "choices")[0]
        # The new tail of this prompt (after the previous prompt and its completion)
        # is the tool observation; the completion itself is the response choice.
        if prev_messages is None:
            result.messages_and_choices.extend(messages)
        else:
            if messages[: len(prev_messages)] != prev_messages:
                raise ValueError(f"call {call} prompt does not extend call {call - 1}'s prompt")
            result.messages_and_choices.extend(messages[len(prev_messages) + 1 :])
        result.messages_and_choices.append(choice)
        prev_messages = messages
        result.prompts.append(messages)
        result.responses.append(response)
        result.calls.append(record)
        previous.append(_choice_text(choice))
    return result
