"""The reference rollout's decode path on CPU: dense experts, merged adapter, bounded prefill and KV memory.

The tiny model (float32) runs the same code the H200 runs; only CUDA-graph capture is
left out (the `static` loop is the captured loop without capture).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rl_pipeline_bench.backends.reference import decode, experts, policy
from rl_pipeline_bench.backends.reference.decode import Batch, Decoder
from rl_pipeline_bench.backends.reference.rollout import banned_token_mask
from rl_pipeline_bench.models.lora import apply_lora, plan_lora
from rl_pipeline_bench.models.reference import build_reference_snapshot

REPO = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    return build_reference_snapshot(REPO / "models" / "tiny_qwen3_moe.yaml", tmp_path_factory.mktemp("hf"),
                                    model="reference-tiny-qwen3moe")


@pytest.fixture(scope="module")
def tokenizer(record):
    return policy.load_tokenizer(record["snapshot_path"])


def _model(record):
    return policy.load_base_model(record["snapshot_path"], CPU).eval()


def _lora_model(record, seed: int):
    """The tiny model with the pipeline's adapter and non-zero B (so the adapter changes the outputs)."""
    base = _model(record)
    torch.manual_seed(seed)
    model = apply_lora(base, plan_lora(base, 8, 32)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05)
    return model


def _batch(tokenizer, rows=5, width=60):
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(60, 4000, (int(n),), generator=g).tolist() for n in torch.linspace(7, width, rows)]
    return Batch(prompts, [11, 1, 17, 0, 9][:rows], [5, 6, 7, 8, 2**62 + 9][:rows])


def test_dense_experts_equal_transformers_own_experts(record):
    assert experts.register()
    moe = _model(record).model.layers[0].mlp.experts
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(13, moe.gate_up_proj.shape[1] if moe.is_transposed else moe.gate_up_proj.shape[-1],
                         generator=g)
    top_k = torch.stack([torch.randperm(moe.num_experts, generator=g)[:2] for _ in range(13)])
    weights = torch.softmax(torch.randn(13, 2, generator=g), -1)
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    want = ALL_EXPERTS_FUNCTIONS["batched_mm"](moe, hidden, top_k, weights)
    got = experts.dense_experts_forward(moe, hidden, top_k, weights)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)
    assert experts.DENSE in ALL_EXPERTS_FUNCTIONS


def test_step_experts_choice_keeps_the_tokens(record, tokenizer):
    model = _model(record)
    banned = banned_token_mask(tokenizer, model.config.vocab_size, CPU)
    batch = _batch(tokenizer)
    dense = Decoder(model, banned, tokenizer.pad_token_id, loop="static")
    assert dense.step_experts == experts.DENSE
    gathered = Decoder(model, banned, tokenizer.pad_token_id, loop="static", step_experts="batched_mm")
    eager = Decoder(model, banned, tokenizer.pad_token_id, loop="eager")
    assert dense.decode(batch)[0] == gathered.decode(batch)[0] == eager.decode(batch)[0]


def test_prefill_in_chunks_and_kv_sub_batches_keep_the_tokens_and_bound_the_mask(record, tokenizer):
    model = _model(record)
    banned = banned_token_mask(tokenizer, model.config.vocab_size, CPU)
    batch = _batch(tokenizer, width=300)
    whole = Decoder(model, banned, tokenizer.pad_token_id, loop="static", kv_budget_bytes=1 << 40,
                    prefill_tokens=1 << 20)
    per_token = decode.kv_bytes_per_token(model.config)
    budget = 2 * (300 + 17) * per_token  # two of the longest rows at most
    bounded = Decoder(model, banned, tokenizer.pad_token_id, loop="static", kv_budget_bytes=budget, prefill_tokens=64)
    masks: list[torch.Size] = []
    hook = model.register_forward_pre_hook(lambda m, a, kw: masks.append(kw["attention_mask"].shape), with_kwargs=True)
    try:
        got = bounded.decode(batch)[0]
    finally:
        hook.remove()
    assert got == whole.decode(batch)[0]
    assert bounded.sub_batches == 1 and whole.sub_batches == 0
    prefill = [s for s in masks if s[2] > 1]
    assert prefill, "the prefill forwards were not seen"
    # each prefill forward's mask: rows x chunk <= prefill_tokens query positions, whatever the prompt length
    assert max(s[0] * s[2] for s in prefill) <= 64
    # each sub-batch's cache: rows x cache length within the KV budget
    assert max(s[0] * s[3] for s in masks) * per_token <= budget


def test_split_rows_and_prefill_chunks_cover_every_row_and_position_within_budget():
    lengths = [3000, 20, 2900, 500, 10, 10, 1500]
    forced = [100, 5, 300, 40, 1, 900, 7]
    parts = decode.split_rows(lengths, forced, bytes_per_token=10, budget=70_000)
    assert sorted(i for p in parts for i in p) == list(range(len(lengths)))
    for p in parts:
        size = len(p) * (max(lengths[i] for i in p) + max(forced[i] for i in p)) * 10
        assert size <= 70_000 or len(p) == 1
    assert decode.split_rows([5, 5], [5, 5], 1, 10**9) == [[0, 1]]
    chunks = decode.prefill_chunks(rows=7, width=1000, budget_tokens=700)
    assert chunks[0][0] == 0 and chunks[-1][1] == 1000
    assert all(b == c for (_, b), (c, _) in zip(chunks, chunks[1:]))
    assert all(7 * (b - a) <= 700 for a, b in chunks)
    assert decode.prefill_chunks(rows=900, width=3, budget_tokens=700) == [(0, 1), (1, 2), (2, 3)]


def test_merged_adapter_decodes_as_the_runtime_adapter_and_publications_do_not_drift(record, tokenizer):
    runtime = _lora_model(record, 1)  # peft applies the adapter at every forward
    rollout = _lora_model(record, 2)
    src, dst = policy.adapter_parameters(runtime), policy.adapter_parameters(rollout)
    merged = policy.MergedAdapter(rollout, dst, CPU)
    pristine = [t.clone() for t in merged.pristine]
    ids = torch.tensor([[1, 53, 200, 300, 2, 1, 54, 99, 101]])
    with torch.no_grad():
        before = rollout(input_ids=ids).logits
        merged.publish(src)
        want = runtime(input_ids=ids).logits
        got = rollout(input_ids=ids).logits
    assert not torch.allclose(before, want, atol=1e-3)  # the publication changed the policy
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    banned = banned_token_mask(tokenizer, runtime.config.vocab_size, CPU)
    batch = _batch(tokenizer)
    assert Decoder(rollout, banned, tokenizer.pad_token_id, loop="static").decode(batch)[0] == \
        Decoder(runtime, banned, tokenizer.pad_token_id, loop="static").decode(batch)[0]
    # many publications later, a zero adapter leaves exactly the pristine base weights
    for _ in range(5):
        merged.publish(src)
    with torch.no_grad():
        for name, p in src.items():
            if "lora_B" in name:
                p.zero_()
    merged.publish(src)
    for layer, saved in zip(merged.layers, pristine):
        assert torch.equal(policy._merge_target(layer), saved)
    record_ = merged.record()
    assert record_["publications"] == 7 and record_["merge_s_max"] >= record_["merge_s_mean"] > 0
    assert record_["merged_layers"] == len(merged.layers) > 0
