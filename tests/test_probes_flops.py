"""Trainer FLOPs per token from the model config, and MFU on hand-made evidence."""

from __future__ import annotations

import pytest

from evidence_fixtures import build_evidence
from probe_fixtures import ACTIVE_MATMUL_PARAMS, MATMUL_PARAMS, tiny_snapshot
from rl_pipeline_bench.evidence.store import read_evidence
from rl_pipeline_bench.probes import flops, reference_data
from rl_pipeline_bench.probes.efficiency import trainer_efficiency

LORA = {"rank": 8, "alpha": 32, "target_modules": ["k_proj", "o_proj", "q_proj", "v_proj"],
        "target_parameters": ["mlp.experts.down_proj", "mlp.experts.gate_up_proj"]}


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    return flops.model_card(tiny_snapshot(tmp_path_factory.mktemp("tiny")))


def test_card_counts_active_parameters_of_the_moe(card):
    assert card["architecture"] == "Qwen3MoeForCausalLM"
    assert card["matmul_params"] == MATMUL_PARAMS
    assert card["active_matmul_params"] == ACTIVE_MATMUL_PARAMS
    assert card["experts"] == {"num_experts": 4, "top_k": 2}
    assert card["attention"] == {"full_attention_layers": 2, "heads": 4, "head_dim": 16, "layer_types": []}
    assert card["embedding_params"] == 4096 * 64  # a lookup: counted nowhere
    kinds = {g["pattern"]: g["kind"] for g in card["groups"]}
    assert kinds["model.layers.*.mlp.experts.gate_up_proj"] == "experts_3d"
    assert kinds["model.layers.*.mlp.gate"] == "router"


def test_lora_parameters_match_peft(card, tmp_path):
    """Adapter size from shapes alone equals what peft builds for the same targets."""
    import torch
    from peft.utils import get_peft_model_state_dict
    from transformers import AutoConfig, AutoModelForCausalLM

    from rl_pipeline_bench.models.lora import apply_lora, plan_lora

    snap = tiny_snapshot(tmp_path / "s")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(snap))
    plan = plan_lora(model, 8, 32)
    assert plan.experts == "per_expert_parameters"
    peft_count = sum(v.numel() for v in get_peft_model_state_dict(apply_lora(model, plan)).values())
    got = flops.lora_params(card, plan.manifest())
    assert got["params"] == peft_count == 21504
    # attention adapters always run (2 layers * 3584); expert adapters at top-2 of 4 (14336 / 2)
    assert got["active_params"] == 2 * 3584 + 14336 / 2


def test_training_flops_by_hand(card):
    seqs = [100, 200]
    got = flops.training_flops(card, seqs, LORA)
    base = 2 * 2 * ACTIVE_MATMUL_PARAMS * 300  # LoRA: frozen base = forward + activation gradients
    adapter = 6 * (2 * 3584 + 7168) * 300
    attention = 3 * 2 * 4 * 16 * 2 * (100 * 101 + 200 * 201)
    assert got["base_matmul_flops"] == base and got["lora_flops"] == adapter
    assert got["attention_flops"] == attention
    assert got["flops"] == base + adapter + attention and got["flops_per_token"] == (base + adapter + attention) / 300
    full = flops.training_flops(card, seqs, None, lora_training=False)
    assert full["base_matmul_flops"] == 6 * ACTIVE_MATMUL_PARAMS * 300 and full["lora_flops"] == 0


def test_mfu_on_hand_made_evidence(card, tmp_path):
    ev_dir = build_evidence(tmp_path, manifest={"lora": LORA, "reference": {"dtype": "float32"},
                                                "gpus": [{"index": 0, "uuid": "GPU-x", "name": "NVIDIA H200"}]})
    got = trainer_efficiency(read_evidence(ev_dir), card)
    # fixture: updates 16-20 accept a = u % 4 + 1 of 4 calls of 50 prompt tokens each, whose completions
    # split the update's 100 u assistant tokens (call 0 takes the remainder);
    # trainer intervals: union 2.0 s per update -> 10.0 s
    seqs = [50 + 100 * u // (u % 4 + 1) + (100 * u % (u % 4 + 1) if t == 0 else 0)
            for u in range(16, 21) for t in range(u % 4 + 1)]
    expected = flops.training_flops(card, seqs, LORA)["flops"]
    assert got["status"] == "estimated" and got["union_s"] == pytest.approx(10.0)
    assert got["tokens"] == sum(seqs) and got["flops"] == pytest.approx(expected)
    assert got["achieved_tflops"] == pytest.approx(expected / 10.0 / 1e12)
    assert got["trainer_gpus"] == 1  # two trainer ranks in the fixture contract, one leased GPU
    assert got["peak"]["bf16_dense_tflops"] == 989
    assert got["mfu_datasheet"] == pytest.approx(expected / 10.0 / 989e12)
    assert got["mfu_measured"] == pytest.approx(expected / 10.0 / 790e12)
    assert any("float32" in n for n in got["notes"]) and any("activation gradients" in n for n in got["notes"])


def test_cpu_run_gets_achieved_flops_and_no_mfu(card, tmp_path):
    got = trainer_efficiency(read_evidence(build_evidence(tmp_path)), card)
    assert got["status"] == "estimated" and got["achieved_tflops"] > 0
    assert got["mfu_datasheet"] is None and any("CPU run" in n for n in got["notes"])
    assert any("no LoRA layout" in n for n in got["notes"])
    assert trainer_efficiency(read_evidence(build_evidence(tmp_path)), None)["status"] == "unavailable"


def test_peaks_table_lookup():
    assert reference_data.gpu_peak("NVIDIA H200")["bf16_dense_tflops"] == 989
    assert reference_data.gpu_peak("NVIDIA H100 PCIe")["bf16_dense_tflops"] == 756
    assert reference_data.gpu_peak("NVIDIA H100 80GB HBM3")["bf16_dense_tflops"] == 989
    assert reference_data.gpu_peak("NVIDIA A100-SXM4-80GB")["bf16_dense_tflops"] == 312
    assert reference_data.gpu_peak("Tesla T4") is None and reference_data.gpu_peak(None) is None
    assert all(row["source"] for row in reference_data.gpu_peaks())
