"""TEST FIXTURES ONLY: a tiny Qwen3-MoE snapshot with hand-known shapes for the FLOPs and checkpoint probes.

Shapes (so the tests can count by hand): hidden 64, 2 layers, 4 heads of 16, 2 KV heads,
4 experts of width 32 with top-2 routing, vocabulary 4096, untied LM head.
"""

from __future__ import annotations

from pathlib import Path

TINY = dict(vocab_size=4096, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=4, num_experts_per_tok=2,
            tie_word_embeddings=False, max_position_embeddings=1024)

# Per layer: q 64*64 + k 64*32 + v 64*32 + o 64*64 = 12288; experts gate_up 4*64*64 + down 4*32*64 = 24576,
# of which top-2 of 4 are active (12288); router 4*64 = 256. Plus the LM head 64*4096.
ACTIVE_MATMUL_PARAMS = 2 * (12288 + 12288 + 256) + 64 * 4096
MATMUL_PARAMS = 2 * (12288 + 24576 + 256) + 64 * 4096


def tiny_snapshot(directory: Path, weights: bool = False) -> Path:
    """config.json (and, with `weights`, randomly initialised safetensors weights) of the tiny model."""
    from transformers import Qwen3MoeConfig

    directory.mkdir(parents=True, exist_ok=True)
    config = Qwen3MoeConfig(**TINY)
    if weights:
        import torch
        from transformers import Qwen3MoeForCausalLM

        torch.manual_seed(0)
        Qwen3MoeForCausalLM(config).save_pretrained(directory)
    else:
        config.save_pretrained(directory)
    return directory
