"""The reference backend's counter-based sampler: integer hashing, exact Gumbel-max draws, batch independence."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from scipy import stats

from rl_pipeline_bench.backends.reference import decode


def _hash32_python(x: int) -> int:
    """The same finaliser in plain Python integers (no int64 tricks), as the reference."""
    m = 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & m
    x ^= x >> 15
    x = (x * 0x846CA68B) & m
    return x ^ (x >> 16)


def test_hash32_on_int64_tensors_equals_plain_integer_arithmetic():
    rng = random.Random(7)
    xs = [0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF] + [rng.getrandbits(32) for _ in range(2000)]
    got = decode.hash32(torch.tensor(xs, dtype=torch.long)).tolist()
    assert got == [_hash32_python(x) for x in xs]
    assert all(0 <= v <= 0xFFFFFFFF for v in got)


def test_gumbel_max_draws_follow_the_softmax():
    """20 000 calls (one key each) sampling from fixed logits: frequencies match softmax (chi-square)."""
    logits = torch.tensor([[0.0, 1.0, 2.0, -1.0, 0.5, -30.0]]).repeat(20000, 1)
    banned = torch.tensor([False, False, False, False, True, False])
    keys = decode.call_keys(list(range(20000)), torch.device("cpu"))
    picked = decode.sample(logits, keys, torch.zeros(1, dtype=torch.long), decode.token_hashes(6, torch.device("cpu")),
                           decode.banned_bias(banned))
    counts = np.bincount(picked.numpy(), minlength=6)
    assert counts[4] == 0  # banned
    p = torch.softmax(logits[0].double().masked_fill(banned, float("-inf")), -1).numpy()
    keep = p > 1e-6
    expected = p[keep] / p[keep].sum() * counts[keep].sum()
    assert stats.chisquare(counts[keep].astype(float), expected).pvalue > 1e-3


def test_noise_depends_on_key_and_step_only():
    th = decode.token_hashes(64, torch.device("cpu"))
    keys = decode.call_keys([5, 9, 5], torch.device("cpu"))
    g0 = decode.gumbel_noise(keys, torch.zeros(1, dtype=torch.long), th)
    g1 = decode.gumbel_noise(keys, torch.ones(1, dtype=torch.long), th)
    assert torch.equal(g0[0], g0[2]) and not torch.equal(g0[0], g0[1]) and not torch.equal(g0[0], g1[0])
    alone = decode.gumbel_noise(keys[1:2], torch.zeros(1, dtype=torch.long), th)
    assert torch.equal(alone[0], g0[1])
    assert torch.isfinite(g0).all()


def test_batch_checks_its_rows():
    with pytest.raises(ValueError, match="one prompt, length and key per row"):
        decode.Batch([[1]], [1, 2], [3])
    with pytest.raises(ValueError, match=">= 0"):
        decode.Batch([[1]], [-1], [3])


def test_graphed_loop_needs_cuda():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        decode.Decoder(torch.nn.Linear(1, 1), torch.zeros(4, dtype=torch.bool), 0, loop="graphed")
