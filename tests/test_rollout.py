"""Shared rollout: request shape, option merging, length checks, multi-call order."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from frameworks.bench_fixtures import FakeChatServer, small_plan_rows, wordlevel_tokenizer
from rl_pipeline_bench.backends.framework.rollout import CHAT_TEMPLATE_KWARGS, CompletionLengthError, build_chat_request, check_completion, default_extra_body, merge_extra_body, run_trajectory, synthetic_reward


def test_merge_keeps_chat_template_defaults_and_extends_nested():
    defaults = {"chat_template_kwargs": {"enable_thinking": False, "preserve_thinking": True}, "top_k": 5}
    merged = merge_extra_body(defaults, {"min_tokens": 7, "chat_template_kwargs": {"custom": 1}, "top_k": 3})
    assert merged == {"chat_template_kwargs": {"enable_thinking": False, "preserve_thinking": True, "custom": 1},
                      "top_k": 3, "min_tokens": 7}
    assert defaults["chat_template_kwargs"] == {"enable_thinking": False, "preserve_thinking": True}


def test_request_forces_length_without_dropping_template_defaults():
    msgs = [{"role": "user", "content": "hi"}]
    req = build_chat_request("m", msgs, None, 12, template_defaults=default_extra_body(),
                             extra_body={"return_token_ids": True})
    assert req["max_tokens"] == 12
    assert req["extra_body"] == {"chat_template_kwargs": CHAT_TEMPLATE_KWARGS, "min_tokens": 12,
                                 "ignore_eos": True, "return_token_ids": True}
    assert "tools" not in req
    # With a client that merges its own defaults (ART), only per-request options are sent.
    bare = build_chat_request("m", msgs, [{"type": "function"}], 3)
    assert bare["extra_body"] == {"min_tokens": 3, "ignore_eos": True} and bare["tools"]
    with pytest.raises(ValueError, match="forced completion length"):
        build_chat_request("m", msgs, None, 0)


def test_check_completion_names_the_mismatch():
    assert check_completion({"usage": {"completion_tokens": 4}}, 4) == 4
    with pytest.raises(CompletionLengthError, match="3 != forced 4 .call 2."):
        check_completion({"usage": {"completion_tokens": 3}}, 4, where="call 2")
    with pytest.raises(CompletionLengthError, match="no usage"):
        check_completion({"choices": []}, 4)


def test_synthetic_reward_varies_inside_a_group():
    rewards = [synthetic_reward(t, 4) for t in range(4)]
    assert rewards[0] == 0.0 and rewards[-1] == 1.0 and len(set(rewards)) == 4
    assert synthetic_reward(0, 1) == 0.0


def _fake_create(server: FakeChatServer):
    async def create(**request):
        body = {k: v for k, v in request.items() if k != "extra_body"} | request.get("extra_body", {})
        server.requests.append(body)
        return server.respond(body)
    return create


def test_run_trajectory_sends_calls_in_order_and_records_them():
    tok = wordlevel_tokenizer()
    server = FakeChatServer(tok)
    rows = [r for r in small_plan_rows() if r["trajectory"] == 1]
    ticks = itertools.count()
    result = asyncio.run(run_trajectory(_fake_create(server), "m", tok, rows, clock=lambda: float(next(ticks)),
                                        policy_version=lambda: 3, template_defaults=default_extra_body()))
    assert [c.call for c in result.calls] == [0, 1, 2]
    assert [c.completion_tokens for c in result.calls] == [3, 5, 2] == [r["max_tokens"] for r in server.requests]
    assert all(r["min_tokens"] == r["max_tokens"] and r["ignore_eos"] for r in server.requests)
    assert all(r["chat_template_kwargs"] == CHAT_TEMPLATE_KWARGS for r in server.requests)
    first = result.calls[0]
    assert (first.update, first.group, first.trajectory, first.policy_version) == (1, 0, 1, 3)
    assert first.started_at < first.finished_at <= result.calls[1].started_at
    # Each later prompt carries the earlier completion text, then the tool observation.
    prev_text = result.responses[0]["choices"][0]["message"]["content"]
    assert server.requests[1]["messages"][-2] == {"role": "assistant", "content": prev_text}
    assert server.requests[1]["messages"][-1]["role"] == "tool"
    # messages_and_choices: call 0's prompt, then per call its choice (+ the next observation).
    mc = result.messages_and_choices
    assert mc[: len(server.requests[0]["messages"])] == server.requests[0]["messages"]
    assert sum(isinstance(x, dict) and "finish_reason" in x for x in mc) == 3
    assert set(result.calls[0].as_row()) >= {"group", "trajectory", "call", "prompt_tokens",
                                             "forced_completion_tokens", "completion_tokens", "accepted",
                                             "started_at", "finished_at", "policy_version", "update"}


def test_run_trajectory_raises_on_short_completion():
    tok = wordlevel_tokenizer()
    server = FakeChatServer(tok, short_by=1)
    rows = [r for r in small_plan_rows() if r["trajectory"] == 0]
    with pytest.raises(CompletionLengthError, match="2 != forced 3 .update 1 group 0 trajectory 0 call 0."):
        asyncio.run(run_trajectory(_fake_create(server), "m", tok, rows, clock=lambda: 0.0))
