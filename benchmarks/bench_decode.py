"""Decode speed of the reference backend beside its anchors, on one identical batch.

    uv run python benchmarks/bench_decode.py                                    # tiny model, CPU
    python3 benchmarks/bench_decode.py --device cuda --build-config models/reference_gpu_qwen3_moe.yaml

Builds the model from its build config (the same seeded builder as the pipeline's
snapshot) and decodes one fixed batch (ROWS prompts of PROMPT_TOKENS random vocabulary
words, every row forced to NEW_TOKENS) with each loop:

- `hf-static`, `hf-compiled`: transformers' own `generate` with a static cache on the bare
  model, its automatic compile off and on (`disable_compile`), min = max new tokens;
  `hf-compiled` runs on CUDA only (on CPU it would compile C++ for minutes);
- `bare`: the project decoder on the bare model;
- `lora-runtime`: the project decoder with the pipeline's LoRA adapter applied by peft at
  every forward and the experts' `batched_mm` in the step: the rollout path before the
  adapter was merged, the baseline the speed-up aim is measured against;
- `lora-merged`: the rollout path: the adapter merged into the weights
  (policy.MergedAdapter) and the dense experts in the step (reference/experts.py);
- `v1` (only when --loops names it): baseline_decode.generate_forced, the first loop.

The project loops are captured on CUDA (`graphed`) and run the same loop uncaptured on
CPU (`static`). The loops alternate within each round so host drift reaches them alike.
Per loop it prints tokens/s, ms per step (a batch's wall time over NEW_TOKENS, prefill
included), the repeat CV and CPU time over wall time. The memory floor is the bytes one
step must read (every weight but the input embedding table, of which a step reads one
row per token, plus the KV cache at the batch's mean length) over the GPU's bandwidth,
nominal and measured with a device-to-device copy. Aims (issue 27, on an H200):
`lora-merged` under 1 ms a step, at least 6.7x `lora-runtime` and at least 4x
`hf-compiled`; each verdict comes from the repeats' interval (benchmarks/verdict.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from verdict import cv_verdict, mean_verdict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOMINAL_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12}  # bytes/s, the vendors' HBM figures
AIM_STEP_MS = 1.0
AIM_OVER_RUNTIME = 6.7
AIM_OVER_HF_COMPILED = 4.0
ALL_LOOPS = ("hf-static", "hf-compiled", "bare", "lora-runtime", "lora-merged", "v1")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(build_config: Path, hf_home: Path):
    from rl_pipeline_bench.models.reference import build_reference_snapshot

    t0 = time.perf_counter()
    record = build_reference_snapshot(build_config, hf_home)
    print(f"snapshot {record['repo_id']}@{record['revision'][:12]} built in {time.perf_counter() - t0:.1f} s", flush=True)
    return record


def adapted_models(record, device: torch.device, publications: int):
    """The pipeline's adapter (seeded; B non-zero, as after training) on two copies: applied by peft, and merged.

    Returns ({"runtime": model, "merged": model}, the MergedAdapter after `publications` timed publications).
    """
    from rl_pipeline_bench.backends.reference import policy
    from rl_pipeline_bench.models.lora import apply_lora, plan_lora

    models, params = {}, {}
    for kind in ("runtime", "merged"):
        base = policy.load_base_model(record["snapshot_path"], device)
        torch.manual_seed(0)
        models[kind] = apply_lora(base, plan_lora(base, 8, 32)).eval()
        params[kind] = policy.adapter_parameters(models[kind])
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in params["runtime"].items():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.01)
    merged = policy.MergedAdapter(models["merged"], params["merged"], device)
    for _ in range(publications):
        merged.publish(params["runtime"])
    return models, merged


def fixed_batch(banned: torch.Tensor, rows: int, prompt_tokens: int, new_tokens: int):
    """ROWS prompts of allowed vocabulary ids from one seeded generator; every row forced to NEW_TOKENS."""
    allowed = (~banned.cpu()).nonzero().flatten()
    gen = torch.Generator().manual_seed(22)
    prompts = [allowed[torch.randint(len(allowed), (prompt_tokens,), generator=gen)].tolist() for _ in range(rows)]
    return prompts, [new_tokens] * rows, [1000003 * (r + 1) for r in range(rows)]


def make_loops(bare, adapted, banned, pad_id: int, device: torch.device, names: list[str]):
    """name -> fn(prompts, lengths, keys) -> completions; a project loop carries its Decoder as `.decoder`."""
    from rl_pipeline_bench.backends.reference.baseline_decode import generate_forced
    from rl_pipeline_bench.backends.reference.decode import Batch, Decoder

    loop = "graphed" if device.type == "cuda" else "static"

    def project(model, **kw):
        decoder = Decoder(model, banned, pad_id, loop=loop, **kw)

        def fn(p, n, k):
            return decoder.decode(Batch(p, n, k))[0]
        fn.decoder = decoder
        return fn

    def hf(compiled: bool):
        def fn(prompts, lengths, keys):
            width = max(len(p) for p in prompts)
            ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
            attn = torch.zeros_like(ids)
            for row, p in enumerate(prompts):
                ids[row, width - len(p):] = torch.tensor(p)
                attn[row, width - len(p):] = 1
            out = bare.generate(input_ids=ids.to(device), attention_mask=attn.to(device), do_sample=True,
                                top_k=0, top_p=1.0, temperature=1.0, max_new_tokens=max(lengths),
                                min_new_tokens=max(lengths), cache_implementation="static",
                                disable_compile=not compiled, pad_token_id=pad_id)
            return out[:, width:].tolist()
        return fn

    def v1(prompts, lengths, keys):
        gens = [torch.Generator(device=device).manual_seed(k) for k in keys]
        return generate_forced(adapted["runtime"], prompts, lengths, banned, gens, pad_id)[0]

    makers = {
        "hf-static": lambda: hf(False), "hf-compiled": lambda: hf(True), "bare": lambda: project(bare),
        "lora-runtime": lambda: project(adapted["runtime"], step_experts="batched_mm"),
        "lora-merged": lambda: project(adapted["merged"]), "v1": lambda: v1,
    }
    unknown = [n for n in names if n not in makers]
    if unknown:
        raise SystemExit(f"unknown loop(s) {', '.join(unknown)}; known: {', '.join(ALL_LOOPS)}")
    return {n: makers[n]() for n in names}


def measured_bandwidth(device: torch.device) -> float | None:
    """Device-to-device copy bandwidth (bytes read + written per second), best of 5 after a warm-up; None off CUDA."""
    if device.type != "cuda":
        return None
    a = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    rates = []
    for _ in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        rates.append(2 * a.numel() / (start.elapsed_time(end) / 1000))
    del a, b
    return max(rates[1:])


def step_bytes(model, rows: int, prompt_tokens: int, new_tokens: int) -> int:
    """Bytes one decode step reads at least: every weight but the input embeddings, plus the KV cache at mean length."""
    from rl_pipeline_bench.backends.reference.decode import kv_bytes_per_token

    embed = model.get_input_embeddings().weight
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) - embed.numel() * embed.element_size()
    return int(weights + rows * (prompt_tokens + new_tokens / 2) * kv_bytes_per_token(model.config))


def timed(fn, device: torch.device) -> tuple[float, float, list]:
    _sync(device)
    cpu0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - t0, time.process_time() - cpu0, out


def git_commit() -> str:
    """HEAD of this checkout; '?' when ROOT is not itself a git checkout (e.g. a copy inside another repo)."""
    try:
        def git(*a: str) -> str:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        if Path(git("rev-parse", "--show-toplevel")).resolve() != ROOT.resolve():
            return "?"
        return git("rev-parse", "--short", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def verdicts(walls: dict[str, list[float]], new_tokens: int) -> tuple[list[str], dict[str, str]]:
    """The aims' verdicts from the repeats (per-round ratios for the speed-ups)."""
    lines, out = [], {}
    if "lora-merged" not in walls:
        return ["  (lora-merged was not run: no verdicts)"], out
    merged = walls["lora-merged"]
    v = mean_verdict([1000 * w / new_tokens for w in merged], AIM_STEP_MS, at_most=True)
    lines.append(f"  lora-merged ms per step {v.text('{:.3f}', ' ms')}")
    out["step_ms"] = v.status
    for other, aim, key in (("lora-runtime", AIM_OVER_RUNTIME, "over_lora_runtime"),
                            ("hf-compiled", AIM_OVER_HF_COMPILED, "over_hf_compiled")):
        if other in walls:
            v = mean_verdict([a / b for a, b in zip(walls[other], merged)], aim, at_most=False)
            lines.append(f"  lora-merged speed over {other} (per round) {v.text('{:.2f}', 'x')}")
            out[key] = v.status
    for name, w in walls.items():
        lines.append(f"  {name}: repeat CV {cv_verdict(w, 0.02).text('{:.4f}')}")
    return lines, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-config", type=Path, default=ROOT / "models" / "tiny_qwen3_moe.yaml")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats of each loop (alternating)")
    parser.add_argument("--publications", type=int, default=5, help="timed merges of the adapter (MergedAdapter)")
    parser.add_argument("--loops", default=None,
                        help=f"comma-separated subset of {','.join(ALL_LOOPS)} (default: all but v1; "
                             "hf-compiled on CUDA only)")
    parser.add_argument("--hf-home", type=Path, default=None, help="where the snapshot is built (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    args = parser.parse_args()

    from rl_pipeline_bench.backends.reference import policy
    from rl_pipeline_bench.backends.reference.rollout import banned_token_mask

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device if args.device != "cuda" else "cuda:0")
    names = (args.loops.split(",") if args.loops else
             [n for n in ALL_LOOPS if n != "v1" and (n != "hf-compiled" or device.type == "cuda")])
    record = build(args.build_config, args.hf_home or Path(tempfile.mkdtemp(prefix="rl-bench-decode-")))
    tokenizer = policy.load_tokenizer(record["snapshot_path"])
    bare = policy.load_base_model(record["snapshot_path"], device).eval()
    adapted, merged = adapted_models(record, device, args.publications)
    params = sum(p.numel() for p in bare.parameters())
    dtype = str(next(bare.parameters()).dtype).removeprefix("torch.")
    banned = banned_token_mask(tokenizer, int(bare.config.vocab_size), device)
    pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    prompts, lengths, keys = fixed_batch(banned, args.rows, args.prompt_tokens, args.new_tokens)
    loops = make_loops(bare, adapted, banned, pad_id, device, names)
    tokens = sum(lengths)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"{args.build_config.name}: {params / 1e6:.1f} M parameters, {dtype}; batch {args.rows} rows x "
          f"{args.prompt_tokens} prompt tokens, {args.new_tokens} new tokens each; device {device} ({gpu}); "
          f"torch {torch.__version__}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}; "
          f"commit {git_commit()}", flush=True)
    publication = merged.record()
    print(f"adapter merge per publication: mean {1000 * publication['merge_s_mean']:.2f} ms, "
          f"max {1000 * publication['merge_s_max']:.2f} ms over {publication['publications']} "
          f"({publication['merged_layers']} LoRA layers)" if publication["publications"] else "no publication timed",
          flush=True)

    outputs = {}
    for name, fn in loops.items():  # warm-up: first-call costs (compiles, captures) stay out of the figures
        wall, _, outputs[name] = timed(lambda: fn(prompts, lengths, keys), device)
        print(f"  warm-up {name}: {wall:.2f} s", flush=True)
    walls = {n: [] for n in loops}
    cpus = {n: [] for n in loops}
    for r in range(args.repeats):
        for name in (list(loops) if r % 2 == 0 else list(reversed(loops))):
            wall, cpu, _ = timed(lambda: loops[name](prompts, lengths, keys), device)
            walls[name].append(wall)
            cpus[name].append(cpu)

    bw = measured_bandwidth(device)
    nominal = next((v for k, v in NOMINAL_BANDWIDTH.items() if k in gpu), None)
    floor_bytes = step_bytes(bare, args.rows, args.prompt_tokens, args.new_tokens)
    results = {}
    print()
    print(f"{'loop':<13} {'tokens/s':>10} {'ms/step':>8} {'CV':>7} {'CPU/wall':>9}")
    for name in loops:
        w = walls[name]
        mean = statistics.fmean(w)
        decoder = getattr(loops[name], "decoder", None)
        results[name] = {
            "walls_s": w, "cpu_s": cpus[name], "tokens_per_s": tokens / mean, "ms_per_step": 1000 * mean / args.new_tokens,
            "cv": statistics.stdev(w) / mean if len(w) > 1 else None,
            "cpu_over_wall": statistics.fmean(c / x for c, x in zip(cpus[name], w)),
            "same_tokens_as_lora_runtime": (outputs[name] == outputs["lora-runtime"]) if "lora-runtime" in outputs else None,
        }
        if decoder is not None:
            results[name] |= {"mode": decoder.mode, "graph_failure": decoder.graph_failure,
                              "step_experts": decoder.step_experts, "experts_failure": decoder.experts_failure}
        r = results[name]
        cv = "n/a" if r["cv"] is None else f"{100 * r['cv']:.1f} %"
        print(f"{name:<13} {r['tokens_per_s']:>10.0f} {r['ms_per_step']:>8.3f} {cv:>7} {r['cpu_over_wall']:>9.2f}"
              + (f"  [{decoder.mode}, step experts {decoder.step_experts}"
                 f"{': ' + decoder.graph_failure if decoder.graph_failure else ''}"
                 f"{'; experts not set: ' + decoder.experts_failure if decoder.experts_failure else ''}]"
                 if decoder else ""))
    floors = {}
    for label, rate in (("nominal", nominal), ("measured copy", bw)):
        if rate:
            floors[label] = {"bandwidth_bytes_per_s": rate, "ms_per_step": 1000 * floor_bytes / rate}
            print(f"memory floor ({label} {rate / 1e12:.2f} TB/s): {floor_bytes / 1e6:.1f} MB a step, "
                  f"{floors[label]['ms_per_step']:.3f} ms per step")
    if not floors:
        print(f"memory floor: {floor_bytes / 1e6:.1f} MB a step (no GPU bandwidth on {device.type})")
    print("\nverdicts (issue 27's aims; met/missed only when the 95 % interval clears the aim):")
    lines, status = verdicts(walls, args.new_tokens)
    print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "build_config": str(args.build_config), "parameters": params, "dtype": dtype, "device": str(device),
            "device_name": gpu, "torch": torch.__version__, "commit": git_commit(), "rows": args.rows,
            "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "repeats": args.repeats,
            "publication": publication, "step_bytes": floor_bytes, "memory_floor": floors,
            "results": results, "verdicts": status}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
