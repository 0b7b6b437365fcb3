"""Decode speed of the reference backend: the v1 loop and the v2 decoder on one identical batch.

    uv run python benchmarks/bench_decode.py                                    # tiny model, CPU
    python3 benchmarks/bench_decode.py --device cuda --build-config models/reference_gpu_qwen3_moe.yaml

Builds the model from its build config (the same seeded builder as the pipeline's
snapshot), puts the pipeline's LoRA adapter on it (as the rollout policy has), and
decodes one fixed batch (ROWS prompts of PROMPT_TOKENS random vocabulary words, every
row forced to NEW_TOKENS) with each loop: `v1` (baseline_decode.generate_forced: a host
sync, one multinomial per row and a growing cache every step), `v2-eager` (the v2
sampler in the eager loop the CPU path uses) and, on CUDA, `v2-graphed` (static cache,
captured decode step). The loops alternate within each round so host drift reaches all
of them alike. Per loop it prints tokens/s (mean of the repeats), the repeat CV, CPU time
over wall time, and (CUDA) summed kernel time over wall time from torch.profiler on
separate profiled repeats. Targets (issue 22, on an H200): kernel time >= 60 % of wall,
repeat CV <= 2 %, tokens/s >= 5x v1's; each verdict comes from the repeats' interval
(benchmarks/verdict.py).
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
TARGET_KERNEL_SHARE = 0.60
TARGET_CV = 0.02
TARGET_SPEEDUP = 5.0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def load(build_config: Path, hf_home: Path, device: torch.device, lora: bool):
    from rl_pipeline_bench.backends.reference import policy
    from rl_pipeline_bench.backends.reference.rollout import banned_token_mask
    from rl_pipeline_bench.models.lora import apply_lora, plan_lora
    from rl_pipeline_bench.models.reference import build_reference_snapshot

    t0 = time.perf_counter()
    record = build_reference_snapshot(build_config, hf_home)
    print(f"snapshot {record['repo_id']}@{record['revision'][:12]} built in {time.perf_counter() - t0:.1f} s", flush=True)
    tokenizer = policy.load_tokenizer(record["snapshot_path"])
    model = policy.load_base_model(record["snapshot_path"], device)
    params = sum(p.numel() for p in model.parameters())
    if lora:
        torch.manual_seed(0)
        model = apply_lora(model, plan_lora(model, 8, 32))
    model.eval()
    banned = banned_token_mask(tokenizer, int(model.config.vocab_size), device)
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    return model, tokenizer, banned, params, dtype


def fixed_batch(banned: torch.Tensor, rows: int, prompt_tokens: int, new_tokens: int):
    """ROWS prompts of allowed vocabulary ids from one seeded generator; every row forced to NEW_TOKENS."""
    allowed = (~banned.cpu()).nonzero().flatten()
    gen = torch.Generator().manual_seed(22)
    prompts = [allowed[torch.randint(len(allowed), (prompt_tokens,), generator=gen)].tolist() for _ in range(rows)]
    return prompts, [new_tokens] * rows, [1000003 * (r + 1) for r in range(rows)]


def make_loops(model, banned, pad_id: int, device: torch.device, names: list[str]):
    from rl_pipeline_bench.backends.reference.baseline_decode import generate_forced
    from rl_pipeline_bench.backends.reference.decode import Batch, Decoder

    def v1(prompts, lengths, keys):
        gens = [torch.Generator(device=device).manual_seed(k) for k in keys]
        return generate_forced(model, prompts, lengths, banned, gens, pad_id)[0]

    loops = {"v1": v1}
    for name, loop in (("v2-eager", "eager"), ("v2-graphed", "graphed")):
        if name in names:
            decoder = Decoder(model, banned, pad_id, loop=loop)
            loops[name] = (lambda d: lambda p, n, k: d.decode(Batch(p, n, k))[0])(decoder)
            loops[name].decoder = decoder
    return {k: v for k, v in loops.items() if k in names}


def timed(fn, device: torch.device) -> tuple[float, float, list]:
    _sync(device)
    cpu0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - t0, time.process_time() - cpu0, out


def profiled(fn, device: torch.device) -> tuple[float, float | None, float | None]:
    """(wall, summed kernel time, GPU busy time: union of kernel intervals) of one run under torch.profiler."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        wall, _, _ = timed(fn, device)
    if device.type != "cuda":
        return wall, None, None
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start)
    summed = sum(b - a for a, b in spans) / 1e6
    busy, end = 0.0, None
    for a, b in spans:
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return wall, summed, busy / 1e6


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-config", type=Path, default=ROOT / "models" / "tiny_qwen3_moe.yaml")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=10, help="timed repeats of each loop (alternating)")
    parser.add_argument("--profile-repeats", type=int, default=3, help="separate repeats under torch.profiler")
    parser.add_argument("--loops", default=None, help="comma-separated subset of v1,v2-eager,v2-graphed")
    parser.add_argument("--profile-loops", default=None,
                        help="loops to profile (default: all; profiling v1's many small ops takes minutes)")
    parser.add_argument("--no-lora", action="store_true", help="decode the bare model (the rollout's has LoRA)")
    parser.add_argument("--hf-home", type=Path, default=None, help="where the snapshot is built (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device if args.device != "cuda" else "cuda:0")
    names = (args.loops.split(",") if args.loops else
             ["v1", "v2-eager"] + (["v2-graphed"] if device.type == "cuda" else []))
    hf_home = args.hf_home or Path(tempfile.mkdtemp(prefix="rl-bench-decode-"))
    model, tokenizer, banned, params, dtype = load(args.build_config, hf_home, device, not args.no_lora)
    pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    prompts, lengths, keys = fixed_batch(banned, args.rows, args.prompt_tokens, args.new_tokens)
    loops = make_loops(model, banned, pad_id, device, names)
    tokens = sum(lengths)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"{args.build_config.name}: {params / 1e6:.1f} M parameters, {dtype}, LoRA {not args.no_lora}; batch "
          f"{args.rows} rows x {args.prompt_tokens} prompt tokens, {args.new_tokens} new tokens each; device {device} "
          f"({gpu}); torch {torch.__version__}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}; "
          f"commit {git_commit()}", flush=True)

    outputs = {}
    for name, fn in loops.items():  # warm-up: first-call costs stay out of the figures
        wall, _, outputs[name] = timed(lambda: fn(prompts, lengths, keys), device)
        print(f"  warm-up {name}: {wall:.2f} s", flush=True)
    walls = {n: [] for n in loops}
    cpus = {n: [] for n in loops}
    for r in range(args.repeats):
        order = list(loops) if r % 2 == 0 else list(reversed(loops))
        for name in order:
            wall, cpu, _ = timed(lambda: loops[name](prompts, lengths, keys), device)
            walls[name].append(wall)
            cpus[name].append(cpu)
    to_profile = args.profile_loops.split(",") if args.profile_loops else list(loops)
    prof = {n: [profiled(lambda: loops[n](prompts, lengths, keys), device) for _ in range(args.profile_repeats)]
            if n in to_profile else [] for n in loops}

    results = {}
    print()
    print(f"{'loop':<11} {'tokens/s':>10} {'mean s':>8} {'CV':>7} {'CPU/wall':>9} {'kernel/wall':>12} {'busy/wall':>10}")
    for name in loops:
        w = walls[name]
        mean = statistics.fmean(w)
        share = [k / pw for pw, k, _ in prof[name] if k is not None]
        busy = [b / pw for pw, _, b in prof[name] if b is not None]
        results[name] = {
            "walls_s": w, "cpu_s": cpus[name], "tokens_per_s": tokens / mean,
            "cv": statistics.stdev(w) / mean if len(w) > 1 else None,
            "cpu_over_wall": statistics.fmean(c / x for c, x in zip(cpus[name], w)),
            "profiled": [{"wall_s": pw, "kernel_s": k, "busy_s": b} for pw, k, b in prof[name]],
            "kernel_over_wall": statistics.fmean(share) if share else None,
            "busy_over_wall": statistics.fmean(busy) if busy else None,
            "same_tokens_as_v2_eager": outputs[name] == outputs.get("v2-eager") if "v2-eager" in outputs else None,
        }
        decoder = getattr(loops[name], "decoder", None)
        if decoder is not None:
            results[name]["mode"] = decoder.mode
            results[name]["graph_failure"] = decoder.graph_failure
        r = results[name]
        fmt = (lambda v: "n/a" if v is None else f"{100 * v:.1f} %")
        print(f"{name:<11} {r['tokens_per_s']:>10.0f} {mean:>8.3f} {fmt(r['cv']):>7} {r['cpu_over_wall']:>9.2f} "
              f"{fmt(r['kernel_over_wall']):>12} {fmt(r['busy_over_wall']):>10}"
              + (f"  [{decoder.mode}{': ' + decoder.graph_failure if decoder.graph_failure else ''}]" if decoder else ""))

    print("\nverdicts (aims of issue 22; met/missed only when the 95 % interval clears the aim):")
    verdicts = {}
    for name in loops:
        if name == "v1":
            continue
        v_cv = cv_verdict(walls[name], TARGET_CV)
        speedups = [a / b for a, b in zip(walls["v1"], walls[name])] if "v1" in walls else []
        lines = [f"  {name}: repeat CV {v_cv.text('{:.4f}')}"]
        verdicts[name] = {"cv": v_cv.status}
        if speedups:
            v_sp = mean_verdict(speedups, TARGET_SPEEDUP, at_most=False)
            lines.append(f"  {name}: tokens/s over v1's (per round) {v_sp.text('{:.2f}', 'x')}")
            verdicts[name]["speedup"] = v_sp.status
        shares = [k / pw for pw, k, _ in prof[name] if k is not None]
        if shares:
            v_k = mean_verdict(shares, TARGET_KERNEL_SHARE, at_most=False)
            lines.append(f"  {name}: kernel time / wall {v_k.text('{:.3f}')}")
            verdicts[name]["kernel_share"] = v_k.status
        print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "build_config": str(args.build_config), "parameters": params, "dtype": dtype, "device": str(device),
            "device_name": gpu, "torch": torch.__version__, "commit": git_commit(), "rows": args.rows,
            "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "repeats": args.repeats,
            "lora": not args.no_lora, "results": results, "verdicts": verdicts}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
