"""The locally built reference model: deterministic snapshot, HF cache layout, tokenizer and chat template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_pipeline_bench.models import reference as rm
from rl_pipeline_bench.models import snapshots
from rl_pipeline_bench.models.snapshots import SnapshotError

REPO = Path(__file__).resolve().parents[1]
BUILD_CONFIG = REPO / "models" / "tiny_qwen3_moe.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    hf_home = tmp_path_factory.mktemp("hf_home")
    return rm.build_reference_snapshot(BUILD_CONFIG, hf_home, model="reference-tiny-qwen3moe")


def test_record_and_hf_cache_layout(built):
    assert built["schema"] == "rl-bench/model/v1"
    assert built["model"] == "reference-tiny-qwen3moe" and built["source"] == "local"
    assert built["repo_id"] == "rl-bench/tiny-qwen3-moe"
    rev = built["revision"]
    assert len(rev) == 40 and all(c in "0123456789abcdef" for c in rev)
    repo = Path(built["hf_home"]) / "hub" / "models--rl-bench--tiny-qwen3-moe"
    assert (repo / "refs" / "main").read_text() == rev
    snap = repo / "snapshots" / rev
    assert Path(built["snapshot_path"]) == snap
    on_disk = {p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file()}
    assert on_disk == set(built["files"])
    for rel, digest in built["files"].items():
        assert snapshots.sha256_file(snap / rel) == digest, rel
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= on_disk
    # The revision is the content digest of the files, so the record proves what was built.
    assert rm.files_digest(built["files"]) == rev
    snapshots.verify_record(built)


def test_same_config_same_revision(built, tmp_path):
    again = rm.build_reference_snapshot(BUILD_CONFIG, tmp_path / "other", model="reference-tiny-qwen3moe")
    assert again["revision"] == built["revision"]
    assert again["files"] == built["files"]


def test_changed_config_changes_revision(built, tmp_path):
    import yaml

    cfg = yaml.safe_load(BUILD_CONFIG.read_text())
    cfg["seed"] = int(cfg["seed"]) + 1
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    other = rm.build_reference_snapshot(path, tmp_path / "hf")
    assert other["revision"] != built["revision"]
    assert other["files"]["model.safetensors"] != built["files"]["model.safetensors"]


def test_rebuild_reuses_a_verified_snapshot_and_repairs_a_corrupt_one(tmp_path):
    first = rm.build_reference_snapshot(BUILD_CONFIG, tmp_path)
    weights = Path(first["snapshot_path"]) / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    again = rm.build_reference_snapshot(BUILD_CONFIG, tmp_path)
    assert again == first
    assert weights.stat().st_mtime_ns == stamp  # reused, not rewritten

    weights.write_bytes(b"corrupted")
    with pytest.raises(SnapshotError):
        snapshots.verify_record(first)
    repaired = rm.build_reference_snapshot(BUILD_CONFIG, tmp_path)
    assert repaired["revision"] == first["revision"]
    snapshots.verify_record(repaired)
    leftovers = [p.name for p in snapshots.repo_folder(tmp_path, first["repo_id"]).iterdir() if p.name.startswith(".build-")]
    assert leftovers == []


def test_bad_build_config_names_the_problem(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nrepo_id: a/b\nseed: 1\ninit_std: 0.02\nmodel: {}\n")
    with pytest.raises(SnapshotError, match="tokenizer"):
        rm.build_reference_snapshot(path, tmp_path / "hf")
    with pytest.raises(SnapshotError, match="does not exist"):
        rm.build_reference_snapshot(tmp_path / "missing.yaml", tmp_path / "hf")


def test_vocabulary_is_fixed_and_words_are_single_tokens():
    vocab = rm.vocabulary(512)
    assert vocab == rm.vocabulary(512) and len(vocab) == len(set(vocab)) == 512
    assert vocab[: len(rm.SPECIAL_TOKENS)] == list(rm.SPECIAL_TOKENS)
    tok = rm.build_tokenizer(512)
    words = [w for w in vocab if w.isalpha()]
    ids = tok(" ".join(words), add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == words
    with pytest.raises(SnapshotError, match="vocab_size"):
        rm.vocabulary(10)


TOOLS = [{
    "type": "function",
    "function": {
        "name": "lookup", "description": "find a word",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    },
}]
MESSAGES = [
    {"role": "system", "content": "baba bebe"},
    {"role": "user", "content": "dodo fafa gaga"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "lookup", "arguments": {"word": "baba"}}}]},
    {"role": "tool", "content": "kaka"},
    {"role": "tool", "content": "lala"},
]


def test_autotokenizer_loads_offline_and_template_renders_tools(built, monkeypatch):
    from transformers import AutoTokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = AutoTokenizer.from_pretrained(built["snapshot_path"], local_files_only=True)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    text = tok.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert text.startswith("<|im_start|>system\nbaba bebe\n\n# Tools")
    assert json.dumps(TOOLS[0]) in text
    assert '<tool_call>\n{"name": "lookup", "arguments": {"word": "baba"}}\n</tool_call><|im_end|>' in text
    # consecutive tool messages share one user turn
    assert "<|im_start|>user\n<tool_response>\nkaka\n</tool_response>\n<tool_response>\nlala\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    thinking = tok.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False, add_generation_prompt=True, enable_thinking=True)
    assert thinking.endswith("<|im_start|>assistant\n")
    plain = tok.apply_chat_template(MESSAGES[:2], tokenize=False, add_generation_prompt=False)
    assert plain == "<|im_start|>system\nbaba bebe<|im_end|>\n<|im_start|>user\ndodo fafa gaga<|im_end|>\n"
    ids = tok.apply_chat_template(MESSAGES[:2], tokenize=False, add_generation_prompt=True, enable_thinking=False)
    encoded = tok(ids, add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(encoded) == [
        "<|im_start|>", "system", "baba", "bebe", "<|im_end|>", "<|im_start|>", "user", "dodo", "fafa", "gaga",
        "<|im_end|>", "<|im_start|>", "assistant", "<think>", "</think>",
    ]


def test_renderer_gets_exact_lengths_from_this_tokenizer(built):
    from transformers import AutoTokenizer

    from rl_pipeline_bench.plan import render

    tok = AutoTokenizer.from_pretrained(built["snapshot_path"], local_files_only=True)
    for n in (0, 1, 17, 300):
        text = render.text_of_tokens(tok, n, 7)
        assert len(tok(text, add_special_tokens=False)["input_ids"]) == n


def test_model_loads_as_qwen3_moe(built):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(built["snapshot_path"], local_files_only=True)
    cfg = model.config
    assert cfg.model_type == "qwen3_moe" and cfg.vocab_size == 4096
    assert cfg.num_experts == 4 and cfg.num_experts_per_tok == 2 and cfg.num_hidden_layers == 2
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[1, 52, 100, 2]])).logits
    assert logits.shape == (1, 4, 4096) and bool(torch.isfinite(logits).all())
    gen = json.loads((Path(built["snapshot_path"]) / "generation_config.json").read_text())
    assert set(gen["eos_token_id"]) == {0, 2}


def test_bfloat16_build_is_the_float32_build_rounded(tmp_path):
    """The GPU model's dtype: the same seeded float32 draws, saved in bfloat16 (small config, same builder)."""
    import torch
    import yaml

    cfg = yaml.safe_load(BUILD_CONFIG.read_text())
    tokenizer = rm.build_tokenizer(int(cfg["tokenizer"]["vocab_size"]))
    fp32 = rm.build_model(cfg, tokenizer)
    cfg["model"]["dtype"] = "bfloat16"
    bf16 = rm.build_model(cfg, tokenizer)
    assert next(bf16.parameters()).dtype == torch.bfloat16
    for (name, a), (_, b) in zip(sorted(fp32.state_dict().items()), sorted(bf16.state_dict().items())):
        assert torch.equal(a.to(torch.bfloat16), b), name
    cfg["model"]["dtype"] = "float16"
    with pytest.raises(rm.SnapshotError, match="model/dtype must be one of float32, bfloat16"):
        rm.build_model(cfg, tokenizer)


def test_gpu_build_config_is_the_same_family_and_loads():
    cfg = rm.load_build_config(REPO / "models" / "reference_gpu_qwen3_moe.yaml")
    tiny = rm.load_build_config(BUILD_CONFIG)
    assert set(cfg["model"]) == set(tiny["model"]) and rm.model_dtype(cfg) == "bfloat16"
