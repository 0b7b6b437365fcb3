"""Render plan rows into chat messages through the model's own tokenizer and template.

Every piece of content is made of words that are single tokens under the tokenizer,
both alone and after a space, joined by single spaces; so a content of n words
encodes to exactly n tokens and the plan's lengths hold after rendering. Each text
is checked by encoding it; a mismatch raises instead of silently drifting.

Conversation layout for new call `k` of a trajectory:
  system     salt words (SALT_TOKENS, only for salted workloads; first, so two salted
             prompts differ at the first content token), then tool_schema_tokens words.
             The tool schema text lives in the system message rather than in a `tools`
             list, because chat templates serialise `tools` as JSON whose quoting and
             punctuation would make its token count tokenizer-dependent. The system
             message is omitted when it would be empty; `tools` is always None.
  user       prompt_tokens words
  assistant / tool      one pair per historical turn (shared by the group)
  assistant / tool      one pair per earlier new call j < k: the completion that call
                        produced, then tool_observation_tokens[j] words
Word choice is seeded from the plan row itself (its identity and lengths), so the
rendered prompts are a pure function of the plan: group-shared parts are identical
across a group's trajectories, and every backend renders the same text.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from typing import Any, Sequence

import numpy as np
import pandas as pd
from ..records.formats import schema_of

#: Number of pool words a salt is rendered as.
SALT_TOKENS = 8

_POOL_CACHE: "weakref.WeakKeyDictionary[Any, tuple[str, ...]]" = weakref.WeakKeyDictionary()
_POOL_CACHE_BY_ID: dict[int, tuple[Any, tuple[str, ...]]] = {}


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def _build_pool(tokenizer) -> tuple[str, ...]:
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    special |= set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    ids = sorted(i for i in set(tokenizer.get_vocab().values()) if i not in special)
    texts = tokenizer.batch_decode([[i] for i in ids])
    candidates: list[str] = []
    seen: set[str] = set()
    for text in texts:
        w = text.strip()
        if w and w.isascii() and w.isalpha() and w not in seen:
            seen.add(w)
            candidates.append(w)
    if not candidates:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no plain alphabetic vocabulary words")
    alone = tokenizer(candidates, add_special_tokens=False)["input_ids"]
    spaced = tokenizer([" " + w for w in candidates], add_special_tokens=False)["input_ids"]
    pool = tuple(w for w, a, s in zip(candidates, alone, spaced) if len(a) == 1 and len(s) == 1)
    if len(pool) < 2:
        raise ValueError(
            f"tokenizer {type(tokenizer).__name__}: fewer than two words encode to one token both alone "
            "and after a space; this tokenizer cannot render exact-length content"
        )
    # One joint check: the whole pool, space-joined, must be exactly one token per word.
    n = len(_encode(tokenizer, " ".join(pool)))
    if n != len(pool):
        raise ValueError(
            f"tokenizer {type(tokenizer).__name__}: {len(pool)} single-token words encode to {n} tokens "
            "when space-joined; word boundaries are not preserved"
        )
    return pool


def word_pool(tokenizer) -> tuple[str, ...]:
    """The tokenizer's single-token words (sorted by token id), computed once per tokenizer object."""
    try:
        pool = _POOL_CACHE.get(tokenizer)
    except TypeError:  # not weak-referenceable
        entry = _POOL_CACHE_BY_ID.get(id(tokenizer))
        pool = entry[1] if entry and entry[0] is tokenizer else None
    if pool is None:
        pool = _build_pool(tokenizer)
        try:
            _POOL_CACHE[tokenizer] = pool
        except TypeError:
            _POOL_CACHE_BY_ID[id(tokenizer)] = (tokenizer, pool)
    return pool


def _as_rng(rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _pick(pool: Sequence[str], n: int, rng) -> list[str]:
    if n < 0:
        raise ValueError(f"token count must be non-negative, got {n}")
    return [pool[i] for i in _as_rng(rng).integers(0, len(pool), size=int(n))]


def _checked(tokenizer, words: list[str]) -> str:
    text = " ".join(words)
    n = len(_encode(tokenizer, text)) if text else 0
    if n != len(words):
        raise ValueError(f"rendered text of {len(words)} words encodes to {n} tokens; expected {len(words)}")
    return text


def text_of_tokens(tokenizer, n: int, rng) -> str:
    """Text that encodes (add_special_tokens=False) to exactly n tokens; rng: numpy Generator or seed."""
    return _checked(tokenizer, _pick(word_pool(tokenizer), n, rng))


def _text_seed(*parts) -> int:
    key = json.dumps([schema_of("render"), *parts])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _rows(plan_rows) -> list[dict[str, Any]]:
    if isinstance(plan_rows, pd.DataFrame):
        rows = plan_rows.to_dict("records")
    else:
        rows = [dict(r) for r in plan_rows]
    if not rows:
        raise ValueError("render_messages needs the plan rows of one trajectory, got none")
    ident = {(r["workload"], int(r["update"]), int(r["group"]), int(r["trajectory"])) for r in rows}
    if len(ident) != 1:
        raise ValueError(f"plan rows span several trajectories {sorted(ident)}; pass one trajectory's rows")
    return sorted(rows, key=lambda r: int(r["call"]))


def _completion_text(tokenizer, completion) -> str:
    if isinstance(completion, str):
        return completion
    return tokenizer.decode([int(t) for t in completion], skip_special_tokens=True)


def render_messages(tokenizer, plan_rows, call: int, previous_completions=()) -> tuple[list[dict[str, str]], None]:
    """Chat messages (and tools=None) for new call `call` of one trajectory.

    plan_rows: that trajectory's plan rows (DataFrame or dicts; at least calls 0..call).
    previous_completions: what calls 0..call-1 produced, as token ids or text. Token ids
    are decoded with skip_special_tokens=True; the plan's exact counts cover the words
    this module writes, not re-tokenised model output.
    """
    rows = _rows(plan_rows)
    by_call = {int(r["call"]): r for r in rows}
    call = int(call)
    missing = [c for c in range(call + 1) if c not in by_call]
    if missing:
        raise ValueError(f"plan rows lack calls {missing} needed to render call {call}")
    previous_completions = list(previous_completions)
    if len(previous_completions) != call:
        raise ValueError(f"call {call} needs {call} previous completions, got {len(previous_completions)}")

    pool = word_pool(tokenizer)
    row = by_call[call]
    hist_c = [int(x) for x in row["history_completion_tokens"]]
    hist_o = [int(x) for x in row["history_observation_tokens"]]
    if len(hist_c) != len(hist_o):
        raise ValueError(f"history lengths differ: {len(hist_c)} completions vs {len(hist_o)} observations")
    # Group-shared seed key: identical for all trajectories of the group.
    group_key = [str(row["workload"]), int(row["update"]), int(row["group"]),
                 int(row["prompt_tokens"]), int(row["tool_schema_tokens"]), hist_c, hist_o]

    messages: list[dict[str, str]] = []
    system_words: list[str] = []
    salt = str(row.get("salt", "") or "")
    if salt:
        system_words += _pick(pool, SALT_TOKENS, _text_seed("salt", salt))
    system_words += _pick(pool, int(row["tool_schema_tokens"]), _text_seed("schema", *group_key))
    if system_words:
        messages.append({"role": "system", "content": _checked(tokenizer, system_words)})
    messages.append({"role": "user", "content": _checked(
        tokenizer, _pick(pool, int(row["prompt_tokens"]), _text_seed("prompt", *group_key)))})
    for h, (nc, no) in enumerate(zip(hist_c, hist_o)):
        messages.append({"role": "assistant", "content": _checked(
            tokenizer, _pick(pool, nc, _text_seed("history-completion", h, *group_key)))})
        messages.append({"role": "tool", "content": _checked(
            tokenizer, _pick(pool, no, _text_seed("history-observation", h, *group_key)))})
    for j in range(call):
        prev = by_call[j]
        n_obs = int(prev["tool_observation_tokens"])
        messages.append({"role": "assistant", "content": _completion_text(tokenizer, previous_completions[j])})
        messages.append({"role": "tool", "content": _checked(tokenizer, _pick(
            pool, n_obs, _text_seed("observation", int(prev["trajectory"]), j, n_obs, *group_key)))})
    return messages, None


def encode_prompt(tokenizer, messages: list[dict[str, str]], tools=None) -> list[int]:
    """Prompt token ids through the tokenizer's chat template, generation prompt on, thinking off."""
    out = tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=True, add_generation_prompt=True, enable_thinking=False,
    )
    # transformers >= 5 returns a BatchEncoding/dict by default; older versions a list.
    if isinstance(out, dict) or hasattr(out, "keys"):
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if out and isinstance(out[0], (list, tuple)):
        if len(out) != 1:
            raise ValueError(f"expected one encoded conversation, got {len(out)}")
        out = out[0]
    return [int(t) for t in out]


def prompt_ids(tokenizer, plan_rows, call: int, previous_completions=()) -> list[int]:
    """Convenience: render_messages then encode_prompt."""
    messages, tools = render_messages(tokenizer, plan_rows, call, previous_completions)
    return encode_prompt(tokenizer, messages, tools)
