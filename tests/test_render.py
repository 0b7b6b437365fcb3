"""Rendering: exact content token counts, shared vs salted prefixes, template encoding.

The tokenizers here are test fixtures built locally with the `tokenizers` library
(a WordLevel one and a small byte-level BPE trained in-process, the family Qwen's
tokenizer belongs to), each with a Qwen-style chat template written for these tests.
"""

from __future__ import annotations

import importlib
import itertools
import random

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from rl_pipeline_bench.plan.render import SALT_TOKENS, encode_prompt, prompt_ids, render_messages, text_of_tokens, word_pool
from rl_pipeline_bench.plan.workloads import iter_trajectories, load_workload, offered_plan

CHAT_TEMPLATE = r"""{%- for m in messages -%}
{%- if m.role == 'tool' -%}
{{- '<|im_start|>user\n<tool_response>\n' + m.content + '\n</tool_response><|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}
{%- endif -%}"""
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
WORDS = ["".join(p) for p in itertools.product("bdgklmnprst", "aeiou", "bdgklmnprst")][:400]


def _wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    tok.add_special_tokens(SPECIAL)
    unk = "[UNK]" if "[UNK]" in tok.get_vocab() else None
    t = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=unk, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    t.chat_template = CHAT_TEMPLATE
    return t


def wordlevel_tokenizer(words=WORDS) -> PreTrainedTokenizerFast:
    vocab = {t: i for i, t in enumerate(["[UNK]", *SPECIAL, "system", "user", "assistant", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return _wrap(tok)


def bytelevel_bpe_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    r = random.Random(0)
    corpus = WORDS * 5 + [" ".join(r.choice(WORDS) for _ in range(30)) for _ in range(300)]
    tok.train_from_iterator(corpus, trainer)
    return _wrap(tok)


def _reference_tokenizer():
    """The reference model's own tokenizer, when its builder module exists."""
    try:
        mod = importlib.import_module("rl_pipeline_bench.models.reference")
    except ImportError:
        pytest.skip("rl_pipeline_bench.models.reference not available")
    build = getattr(mod, "build_tokenizer", None)
    if build is None:
        pytest.skip("reference_model has no build_tokenizer()")
    return build()


BUILDERS = {"wordlevel": wordlevel_tokenizer, "bytelevel_bpe": bytelevel_bpe_tokenizer, "reference": _reference_tokenizer}


@pytest.fixture(scope="module", params=list(BUILDERS))
def tok(request):
    return BUILDERS[request.param]()


def _plan(config, workload, scale=0.05, seed=3):
    return offered_plan(load_workload(config, workload, scale), seed, 1)


def _find(hay: list[int], needle: list[int], start: int) -> int:
    for i in range(start, len(hay) - len(needle) + 1):
        if hay[i:i + len(needle)] == needle:
            return i
    return -1


def _expected_counts(rows, call):
    """Content token counts per message, straight from the plan."""
    r = rows[rows["call"] == call].iloc[0]
    system = (SALT_TOKENS if r["salt"] else 0) + r["tool_schema_tokens"]
    counts = ([system] if system else []) + [r["prompt_tokens"]]
    for c, o in zip(r["history_completion_tokens"], r["history_observation_tokens"]):
        counts += [c, o]
    for j in range(call):
        counts += [None, rows[rows["call"] == j].iloc[0]["tool_observation_tokens"]]  # None: model output
    return counts


def test_word_pool_words_are_single_tokens_and_cached(tok):
    pool = word_pool(tok)
    assert len(pool) >= 50 and len(set(pool)) == len(pool)
    for w in pool[:200]:
        assert len(tok.encode(w, add_special_tokens=False)) == 1
        assert len(tok.encode(" " + w, add_special_tokens=False)) == 1
    assert word_pool(tok) is pool


@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_text_of_tokens_is_exact_and_seeded(tok, n):
    text = text_of_tokens(tok, n, np.random.default_rng(1))
    assert len(tok.encode(text, add_special_tokens=False)) == n
    assert text == text_of_tokens(tok, n, 1)
    if n >= 7:
        assert text != text_of_tokens(tok, n, 2)


def test_tokenizer_without_words_is_refused():
    no_words = wordlevel_tokenizer(words=["1", "2", "x1"])
    assert "system" in word_pool(no_words)  # only the template's role words qualify here
    empty = _wrap(Tokenizer(models.WordLevel({"[UNK]": 0, "123": 1}, unk_token="[UNK]")))
    with pytest.raises(ValueError, match="no plain alphabetic"):
        text_of_tokens(empty, 3, 0)


@pytest.mark.parametrize("workload", ["multi_turn", "long_generation", "tool_history", "multi_turn_salted"])
def test_rendered_content_counts_are_exact(tok, config, workload):
    plan = _plan(config, workload)
    for (_, _, t), rows in itertools.islice(iter_trajectories(plan), 3):
        previous = []
        for call in range(int(rows["call"].max()) + 1):
            messages, tools = render_messages(tok, rows, call, previous)
            assert tools is None
            expected = _expected_counts(rows, call)
            assert len(messages) == len(expected)
            ids = encode_prompt(tok, messages, tools)
            pos = 0
            for msg, n in zip(messages, expected):
                content = tok.encode(msg["content"], add_special_tokens=False)
                if n is not None:
                    assert len(content) == n, (msg["role"], n)
                if content:  # the content tokens sit in the prompt unchanged and in order
                    at = _find(ids, content, pos)
                    assert at >= 0, msg["role"]
                    pos = at + len(content)
            assert ids == prompt_ids(tok, rows, call, previous)
            # the next call sees this call's completion: token ids for trajectory 0, text otherwise
            n = int(rows.iloc[call]["forced_completion_tokens"])
            text = text_of_tokens(tok, n, 100 + call)
            previous.append(tok.encode(text, add_special_tokens=False) if t == 0 else text)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_unsalted_group_shares_prefix(tok, config):
    plan = _plan(config, "multi_turn", scale=0.25)  # two groups per update
    g = plan[(plan["update"] == 1) & (plan["group"] == 0)]
    t0, t1 = g[g["trajectory"] == 0], g[g["trajectory"] == 1]
    p0, p1 = prompt_ids(tok, t0, 0), prompt_ids(tok, t1, 0)
    assert p0 == p1  # call 0 is entirely group-shared
    c = text_of_tokens(tok, 5, 0)
    q0, q1 = prompt_ids(tok, t0, 1, [c]), prompt_ids(tok, t1, 1, [c])
    assert _common_prefix(q0, p0) >= len(p0) - 8  # call 1 extends call 0's prompt (all but the generation prompt)
    assert q0 != q1  # the observations after call 0 are per trajectory
    assert _common_prefix(q0, q1) > len(p0) - 8
    other = plan[(plan["update"] == 1) & (plan["group"] == 1) & (plan["trajectory"] == 0)]
    assert prompt_ids(tok, other, 0) != p0  # another group gets another prompt


def test_salted_prompts_differ_at_first_content_token(tok, config):
    plan = _plan(config, "multi_turn_salted")
    g = plan[(plan["update"] == 1) & (plan["group"] == 0)]
    t0, t1 = g[g["trajectory"] == 0], g[g["trajectory"] == 1]
    msgs0, _ = render_messages(tok, t0, 0)
    p0, p1 = encode_prompt(tok, msgs0), prompt_ids(tok, t1, 0)
    first_content = _find(p0, tok.encode(msgs0[0]["content"], add_special_tokens=False), 0)
    assert msgs0[0]["role"] == "system" and first_content > 0
    assert _common_prefix(p0, p1) == first_content  # only the template's own tokens are shared
    # the next call of the same trajectory has its own salt too: no reuse of call 0's prefix
    q0 = prompt_ids(tok, t0, 1, [text_of_tokens(tok, 4, 0)])
    assert _common_prefix(p0, q0) == first_content


def test_render_refuses_bad_input(tok, config):
    plan = _plan(config, "multi_turn")
    rows = plan[(plan["group"] == 0) & (plan["trajectory"] == 0)]
    with pytest.raises(ValueError, match="previous completions"):
        render_messages(tok, rows, 1, [])
    with pytest.raises(ValueError, match="several trajectories"):
        render_messages(tok, plan[plan["group"] == 0], 0, [])
    with pytest.raises(ValueError, match="lack calls"):
        render_messages(tok, rows[rows["call"] == 2], 2, ["a", "b"])


class _FakeTemplate:
    def __init__(self, out):
        self.out = out

    def apply_chat_template(self, messages, **kwargs):
        assert kwargs["add_generation_prompt"] is True and kwargs["enable_thinking"] is False
        return self.out


@pytest.mark.parametrize("out", [[1, 2, 3], {"input_ids": [1, 2, 3]}, {"input_ids": [[1, 2, 3]]}, np.array([1, 2, 3])])
def test_encode_prompt_accepts_every_return_shape(out):
    assert encode_prompt(_FakeTemplate(out), [{"role": "user", "content": "x"}]) == [1, 2, 3]
