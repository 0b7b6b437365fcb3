"""A multi-call plan trajectory for SkyRL, sent as token ids so later prompts extend by construction.

Chat requests re-render the history from text, and vLLM strips special tokens from the
text it returns; with forced lengths and `ignore_eos` a completion can hold special
tokens, so a re-rendered later prompt would not extend the earlier prompt plus its
completion, and SkyRL trains on one token sequence per trajectory. So each call goes to
the OpenAI-compatible `/v1/completions` endpoint (which SkyRL's router serves and
`RemoteInferenceClient.completion` uses) with the prompt as token ids:

- call 0: the rendered conversation through the tokenizer's chat template;
- call k: call k-1's prompt ids + the completion ids the server returned + the tool
  observation, rendered the way SkyRL's own multi-turn generator does
  (`SkyRLGymGenerator.get_obs_ids_from_obs`: end-of-turn token when the completion
  lacks one, then the observation turn against a fixed base conversation, with the
  generation prompt).

The observation words are the plan's (rl_pipeline_bench.plan.render); only the history
tokens come from the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ...plan.render import render_messages
from ...plan.call_identity import call_label
from ..framework.rollout import CallRecord, check_completion, forced_length_options, merge_extra_body

#: The header SkyRL's client routes a session (trajectory) by.
SESSION_HEADER = "X-Session-ID"
#: SkyRL's fixed base conversation (skyrl.train.generators.skyrl_gym_generator, 0.4.0).
BASE_CONVERSATION = [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "I am a user."}]


def _ids(out: Any) -> list[int]:
    if hasattr(out, "keys"):
        out = out["input_ids"]
    return [int(t) for t in out]


def template_ids(tokenizer, messages, *, generation_prompt: bool, template_kwargs: Mapping[str, Any]) -> list[int]:
    return _ids(tokenizer.apply_chat_template(list(messages), add_generation_prompt=generation_prompt,
                                              tokenize=True, return_dict=False, **dict(template_kwargs)))


def observation_ids(tokenizer, observation: Sequence[Mapping[str, Any]], template_kwargs: Mapping[str, Any]) -> list[int]:
    """Tokens of the observation turn(s) and the next generation prompt, after an assistant turn's end token."""
    base = template_ids(tokenizer, BASE_CONVERSATION, generation_prompt=False, template_kwargs=template_kwargs)
    eos = tokenizer.eos_token_id
    if eos in base:  # as SkyRL does: cut after the last end token, so what follows it belongs to the observation
        base = base[: len(base) - base[::-1].index(eos)]
    full = template_ids(tokenizer, [*BASE_CONVERSATION, *observation], generation_prompt=True,
                        template_kwargs=template_kwargs)
    if full[: len(base)] != base:
        raise ValueError("the chat template renders the base conversation differently when followed by an observation")
    return full[len(base):]


@dataclass
class TokenTrajectory:
    """One trajectory as SkyRL trains it, plus its calls for calls.parquet."""

    key: tuple[int, int, int]
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    #: per call: the prompt ids sent
    prompts: list[list[int]] = field(default_factory=list)


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _choice_tokens(response: Any, call: int) -> tuple[list[int], list[float], str]:
    choice = _get(response, "choices")[0]
    ids = _get(choice, "token_ids")
    if not ids:
        raise ValueError(f"call {call}: the completion carries no token_ids; the server ignored return_token_ids")
    lps = _get(_get(choice, "logprobs") or {}, "token_logprobs") or []
    if len(lps) != len(ids):
        raise ValueError(f"call {call}: {len(lps)} logprobs for {len(ids)} tokens")
    return [int(t) for t in ids], [float(x) for x in lps], str(_get(choice, "text") or "")


async def run_token_trajectory(
    complete: Callable[..., Awaitable[Any]],
    model: str,
    tokenizer: Any,
    rows: Any,
    *,
    clock: Callable[[], float],
    policy_version: Callable[[], int],
    template_kwargs: Mapping[str, Any],
    on_call: Callable[[CallRecord], None] | None = None,
    session_id: str | None = None,
) -> TokenTrajectory:
    """Send a trajectory's calls in order through `complete` (a completions `create`); check each length.

    on_call: told each call as soon as it is answered and checked.
    session_id: sent with every call as the `X-Session-ID` header, as SkyRL's own client does
        (RemoteInferenceClient, remote_inference_client.py:967-969): SkyRL's router hashes it
        (policy consistent_hash, inference_servers/utils.py:427-432), so one trajectory's calls
        reach one engine.
    """
    records = rows.to_dict("records") if hasattr(rows, "to_dict") else [dict(r) for r in rows]
    records.sort(key=lambda r: int(r["call"]))
    if not records:
        raise ValueError("run_token_trajectory needs at least one plan row")
    first = records[0]
    out = TokenTrajectory(key=(int(first["update"]), int(first["group"]), int(first["trajectory"])))
    texts: list[str] = []
    prev_messages: list[dict[str, Any]] | None = None
    prompt: list[int] = []
    for row in records:
        call = int(row["call"])
        messages, _tools = render_messages(tokenizer, records, call, texts)
        if prev_messages is None:
            prompt = template_ids(tokenizer, messages, generation_prompt=True, template_kwargs=template_kwargs)
            out.prompt_ids = list(prompt)
        else:
            # messages = previous prompt messages, the previous assistant turn, then this call's observation.
            extension = ([] if out.response_ids[-1] == tokenizer.eos_token_id else [tokenizer.eos_token_id])
            extension += observation_ids(tokenizer, messages[len(prev_messages) + 1:], template_kwargs)
            prompt = prompt + completion + extension
            out.response_ids += extension
            out.loss_mask += [0] * len(extension)
            out.logprobs += [0.0] * len(extension)
        forced = int(row["forced_completion_tokens"])
        version = int(policy_version())
        started = clock()
        response = await complete(model=model, prompt=prompt, max_tokens=forced, logprobs=1,
                                  extra_body=merge_extra_body(forced_length_options(forced),
                                                              {"return_token_ids": True,
                                                               "skip_special_tokens": False}),
                                  **({"extra_headers": {SESSION_HEADER: session_id}} if session_id else {}))
        finished = clock()
        where = call_label(*out.key[:3], call)
        n = check_completion(response, forced, where=where)
        completion, lps, text = _choice_tokens(response, call)
        if len(completion) != n:
            raise ValueError(f"{where}: {len(completion)} token ids for {n} completion tokens")
        out.prompts.append(list(prompt))
        out.response_ids += completion
        out.loss_mask += [1] * len(completion)
        out.logprobs += lps
        out.calls.append(CallRecord(
            update=out.key[0], group=out.key[1], trajectory=out.key[2], call=call,
            prompt_tokens=int(row["prompt_tokens"]), forced_completion_tokens=forced, completion_tokens=n,
            accepted=True, started_at=started, finished_at=finished, policy_version=version,
        ))
        if on_call is not None:
            on_call(out.calls[-1])
        texts.append(text)
        prev_messages = messages
    return out
