"""The embedded reference model: a tiny Qwen3-MoE built locally and saved as a Hugging Face snapshot.

The reference backend must run anywhere (no network, no GPU) yet go through the same
snapshot code path a real pinned model uses: `AutoTokenizer` / `AutoModelForCausalLM`
loading from `HF_HOME/hub/models--ORG--NAME/snapshots/REVISION/`, a chat template with
tools, tool messages and `enable_thinking`, safetensors weights. Everything here is a
pure function of the build config (models/tiny_qwen3_moe.yaml for CPU smoke runs,
models/reference_gpu_qwen3_moe.yaml for one GPU): the vocabulary is
generated, the weights are drawn from one seeded CPU generator in parameter-name order,
and the revision is a digest of the saved files, so the same config gives the same
revision and a changed config or library output gives a new one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import shutil
import string
import tempfile
from pathlib import Path
from typing import Any, Mapping

import yaml

from . import snapshots
from .snapshots import SnapshotError
from ..records.formats import schema_of
from ..records.jsonfile import read_json

log = logging.getLogger(__name__)

#: Special tokens, in id order (ids 0..len-1). Qwen3 naming; `<|unk|>` is what a
#: word-level tokenizer maps unknown words to.
SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|unk|>",
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)
UNK = "<|unk|>"
PAD = "<|endoftext|>"
EOS = "<|im_end|>"

#: Words the chat template and JSON tool schemas use, so they do not map to <|unk|>.
TEMPLATE_WORDS = (
    "system", "user", "assistant", "tool", "tools", "Tools", "The", "functions", "below", "are",
    "available", "To", "call", "one", "write", "a", "JSON", "object", "with", "name", "and",
    "arguments", "between", "function", "type", "description", "parameters", "properties",
    "required", "string", "integer", "number", "boolean", "array", "items", "enum", "null",
    "true", "false",
)
_CONSONANTS = "bdfghjklmnprstvwz"
_VOWELS = "aeiou"

#: Snapshot file that records the build config the snapshot was made from.
BUILD_RECORD = "rl_bench_build.json"

# A Qwen-style ChatML template written for this tokenizer. Tool messages are folded
# into a user turn as <tool_response> blocks; `enable_thinking=false` puts an empty
# think block after the generation prompt, as Qwen3 does.
CHAT_TEMPLATE = (
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages and messages[0].role == 'system' -%}{{- messages[0].content + '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\nThe functions below are available. To call one, write a JSON object with name and arguments "
    "between <tool_call> and </tool_call>.\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools><|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' -%}"
    "{%- if not loop.first -%}{{- raise_exception('a system message may only come first') -}}{%- endif -%}"
    "{%- if not tools -%}{{- '<|im_start|>system\\n' + message.content + '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- elif message.role == 'user' -%}"
    "{{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if message.reasoning_content -%}{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' -}}{%- endif -%}"
    "{{- message.content or '' -}}"
    "{%- for tc in (message.tool_calls or []) -%}"
    "{%- set fn = tc.function if tc.function is defined else tc -%}"
    "{{- '\\n<tool_call>\\n{\"name\": ' + (fn.name | tojson) + ', \"arguments\": ' -}}"
    "{%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- else -%}{{- raise_exception('unknown message role: ' + message.role) -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)


def load_build_config(path: Path | str) -> dict[str, Any]:
    """Read and check the build config; errors name the file and the key."""
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"reference model build config {path} does not exist")
    try:
        cfg = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SnapshotError(f"reference model build config {path} is not valid YAML: {exc}") from exc
    if not isinstance(cfg, dict):
        raise SnapshotError(f"reference model build config {path} must be a mapping")
    for key in ("name", "repo_id", "seed", "init_std", "tokenizer", "model"):
        if key not in cfg:
            raise SnapshotError(f"reference model build config {path} lacks key '{key}'")
    if "vocab_size" not in (cfg["tokenizer"] or {}):
        raise SnapshotError(f"reference model build config {path} lacks key 'tokenizer/vocab_size'")
    return cfg


# ---------------------------------------------------------------------------
# Tokenizer


def vocabulary(vocab_size: int) -> list[str]:
    """The full vocabulary in id order: specials, punctuation, digits, template words, pseudo-words.

    Pseudo-words are consonant-vowel syllables (ba, be, ..., baba, babe, ...) enumerated
    in a fixed order, so the vocabulary is a pure function of `vocab_size`.
    """
    base = list(SPECIAL_TOKENS) + list(string.punctuation) + list(string.digits) + list(TEMPLATE_WORDS)
    if len(set(base)) != len(base):
        raise AssertionError("duplicate entries in the fixed part of the vocabulary")
    if vocab_size < len(base) + 2:
        raise SnapshotError(f"tokenizer vocab_size {vocab_size} is below the {len(base) + 2} tokens the tokenizer needs")
    vocab = list(base)
    seen = set(base)
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    for n in itertools.count(1):
        for parts in itertools.product(syllables, repeat=n):
            word = "".join(parts)
            if word not in seen:
                seen.add(word)
                vocab.append(word)
                if len(vocab) == vocab_size:
                    return vocab


def build_tokenizer(vocab_size: int = 4096, model_max_length: int = 16384):
    """Word-level fast tokenizer with Qwen3 special tokens and chat template (deterministic).

    Text splits on whitespace and isolates punctuation and single digits; every vocabulary
    word is one token alone and after a space, which the renderer needs for exact lengths.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = vocabulary(int(vocab_size))
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(vocab)}, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
    ])
    extra = [t for t in SPECIAL_TOKENS if t not in (PAD, EOS, UNK)]
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=extra,
        model_max_length=int(model_max_length),
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    if len(fast) != vocab_size:
        raise AssertionError(f"tokenizer has {len(fast)} tokens, expected {vocab_size}")
    return fast


# ---------------------------------------------------------------------------
# Model


def _model_config(cfg: Mapping[str, Any], tokenizer):
    from transformers import Qwen3MoeConfig

    m = dict(cfg["model"])
    rope_theta = float(m.pop("rope_theta", 10000.0))
    m.pop("dtype", None)  # the saved weights' dtype: model_dtype()
    return Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS),
        bos_token_id=None,
        **m,
    )


#: Weight dtypes a build config may save (model/dtype); the weights are drawn in float32 either way.
DTYPES = ("float32", "bfloat16")


def model_dtype(cfg: Mapping[str, Any]) -> str:
    dtype = str((cfg.get("model") or {}).get("dtype", "float32"))
    if dtype not in DTYPES:
        raise SnapshotError(f"build config model/dtype must be one of {', '.join(DTYPES)} (got {dtype!r})")
    return dtype


def build_model(cfg: Mapping[str, Any], tokenizer):
    """Qwen3MoeForCausalLM with weights from one seeded CPU generator (name order), saved in model/dtype.

    The draws are float32 whatever the saved dtype, so a bfloat16 build is the float32
    build rounded, and the same config always gives the same bytes.
    """
    import torch
    from transformers import Qwen3MoeForCausalLM

    dtype = model_dtype(cfg)
    model = Qwen3MoeForCausalLM(_model_config(cfg, tokenizer)).to(torch.float32)
    gen = torch.Generator(device="cpu").manual_seed(int(cfg["seed"]))
    std = float(cfg["init_std"])
    with torch.no_grad():
        for name, param in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=gen, dtype=torch.float32) * std)
    model = model.to(getattr(torch, dtype))
    model.eval()
    return model


def _generation_config(tokenizer):
    from transformers import GenerationConfig

    return GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        eos_token_id=[tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(PAD)],
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
    )


# ---------------------------------------------------------------------------
# Snapshot


def files_digest(files: Mapping[str, str]) -> str:
    """40-hex revision of a snapshot: sha256 over its sorted (relpath, sha256) pairs, truncated."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel}\0{files[rel]}\n".encode())
    return h.hexdigest()[:40]


def _hash_tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): snapshots.sha256_file(p)
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def _save(cfg: Mapping[str, Any], out: Path) -> None:
    tok_cfg = cfg["tokenizer"]
    tokenizer = build_tokenizer(int(tok_cfg["vocab_size"]), int(tok_cfg.get("model_max_length", 16384)))
    model = build_model(cfg, tokenizer)
    model.generation_config = _generation_config(tokenizer)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # Make AutoTokenizer use the tokenizer.json as saved, not the qwen3_moe default class.
    tc_path = out / "tokenizer_config.json"
    tc = read_json(tc_path, "saved tokenizer config", SnapshotError)
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc_path.write_text(json.dumps(tc, indent=2, sort_keys=True) + "\n")
    if not (out / "chat_template.jinja").exists() and "chat_template" not in tc:
        raise SnapshotError("the saved tokenizer carries no chat template")
    record = {"schema": schema_of("reference-build"), "build_config": cfg}
    (out / BUILD_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def _snapshot_ok(snap: Path, revision: str) -> bool:
    """A snapshot verifies when its files still hash to its revision (content addressed)."""
    return snap.is_dir() and files_digest(_hash_tree(snap)) == revision


def _write_ref(repo: Path, revision: str) -> None:
    ref = repo / "refs" / "main"
    ref.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=ref.parent, prefix=".main.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(revision)
    os.chmod(tmp, 0o644)
    os.replace(tmp, ref)


def build_reference_snapshot(build_config_path: Path | str, hf_home: Path | str, *, model: str | None = None,
                             repo_id: str | None = None) -> dict[str, Any]:
    """Build (or reuse) the tiny model's snapshot in HF_HOME and return its identity record.

    The model is always rebuilt in a temporary folder next to the snapshots (cheap, and
    the only way to know the revision of this config); if `snapshots/REVISION` already
    exists and still hashes to REVISION it is reused untouched, otherwise the fresh
    build takes its place. `refs/main` then names REVISION.
    """
    import torch

    cfg = load_build_config(build_config_path)
    model = model or str(cfg["name"])
    repo_id = repo_id or str(cfg["repo_id"])
    hf_home = Path(hf_home).resolve()
    repo = snapshots.repo_folder(hf_home, repo_id)
    (repo / "snapshots").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=repo, prefix=".build-"))
    tmp.chmod(0o755)  # mkdtemp makes it private; a shared cache must stay readable
    try:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # identical float results regardless of the host's core count
        try:
            _save(cfg, tmp)
        finally:
            torch.set_num_threads(threads)
        revision = files_digest(_hash_tree(tmp))
        snap = repo / "snapshots" / revision
        if _snapshot_ok(snap, revision):
            log.info("reusing verified snapshot %s", snap)
        else:
            if snap.exists():
                log.warning("snapshot %s does not hash to its revision; replacing it with a fresh build", snap)
                shutil.rmtree(snap)
            os.replace(tmp, snap)
            log.info("built snapshot %s", snap)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    _write_ref(repo, revision)
    return snapshots.identity_record(model, "local", repo_id, revision, hf_home)
