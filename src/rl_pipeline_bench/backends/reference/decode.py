"""Forced-length decoding that the device, not the host, paces.

Every row samples exactly its forced number of tokens with special tokens masked out
(as an inference server does with `min_tokens = max_tokens` and `ignore_eos`). The host
never waits on the device inside the loop: row lengths are known in advance, so which
rows are done is host arithmetic, and the tokens stay on the device until the batch ends.

Sampling is counter-based: the noise for token v at step s of a call is a pure function
of (the call's 64-bit key, s, v), computed with 32-bit integer hashing on the device and
turned into Gumbel noise, and the token is argmax(logits + noise) (the Gumbel-max trick,
an exact draw from softmax(logits)). A call's draws therefore do not depend on which
other calls share its batch, on the batch's order, or on any generator's state.

Two loops share that sampler:
- `graphed` (CUDA): a static KV cache (transformers' StaticCache) sized for the batch,
  a prefill in chunks of query positions (so its mask and activations are bounded by
  `prefill_tokens`, not by rows x prompt length squared; only the last position's logits
  are computed), then the decode step (forward of one token per row, sampling, the
  counters' advance) captured once in a CUDA graph and replayed; MoE experts run
  every expert on every token inside the step (experts.py: no per-token weight gather,
  no data-dependent shape). Finished rows keep running to the batch's end: on a GPU one
  step costs about the same at any batch size. `static` is the same loop without capture
  (where capture fails, and to test it on CPU).
- `eager` (CPU): a growing cache, rows leave the batch when done.

Either loop splits a batch whose KV cache would exceed `kv_budget_bytes` into
sub-batches of similar prompt length, decoded one after the other; draws are per call,
so the tokens do not change.
"""

from __future__ import annotations

import inspect
import logging
import threading
from dataclasses import dataclass
from typing import Callable

import torch

from . import experts
from .policy import cache_keyword

log = logging.getLogger(__name__)

#: Identity of the sampling scheme; a change that alters sampled tokens bumps it.
SAMPLER = "rl-bench/reference-sampler/v3: counter-based Gumbel-max (hash32 of call key, step, token); adapter merged into the rollout weights"

_M32 = 0xFFFFFFFF
_M16 = 0xFFFF
_U24 = 1.0 / (1 << 24)


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for int64 x in [0, 2**32), in 16-bit halves so no int64 product overflows."""
    return (((((x >> 16) * c) & _M16) << 16) + (x & _M16) * c) & _M32


def hash32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer finaliser (xor-shift / multiply rounds) on int64 tensors holding values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def call_keys(keys: list[int], device: torch.device) -> torch.Tensor:
    """[B, 2] int64: each call's 64-bit key as two 32-bit words."""
    return torch.tensor([[k & _M32, (k >> 32) & _M32] for k in keys], dtype=torch.long, device=device)


def gumbel_noise(keys: torch.Tensor, step: torch.Tensor, token_hash: torch.Tensor) -> torch.Tensor:
    """[B, V] float32 Gumbel(0, 1) noise of step `step` ([1] or [B] int64) for calls `keys` ([B, 2])."""
    row = hash32(keys[:, 0] ^ hash32(keys[:, 1] ^ hash32(step & _M32)))
    bits = hash32(row[:, None] ^ token_hash[None, :])
    u = ((bits >> 8).to(torch.float32) + 0.5) * _U24  # in (0, 1), never 0 or 1
    return -torch.log(-torch.log(u))


def token_hashes(vocab_size: int, device: torch.device) -> torch.Tensor:
    return hash32(torch.arange(vocab_size, dtype=torch.long, device=device) ^ 0x5BD1E995)


def sample(logits: torch.Tensor, keys: torch.Tensor, step: torch.Tensor, token_hash: torch.Tensor,
           banned_bias: torch.Tensor) -> torch.Tensor:
    """[B] token ids: argmax of logits + banned bias (-inf on banned ids) + the calls' Gumbel noise."""
    scores = logits.float()[:, : banned_bias.numel()] + banned_bias + gumbel_noise(keys, step, token_hash)
    return scores.argmax(dim=-1)


def banned_bias(banned: torch.Tensor) -> torch.Tensor:
    """-inf where a token id is banned, 0 elsewhere (added to the logits before the argmax)."""
    return torch.zeros(banned.shape, dtype=torch.float32, device=banned.device).masked_fill(banned, float("-inf"))


@dataclass
class Batch:
    """One decode batch: prompts, forced lengths and sampling keys, row by row."""

    prompts: list[list[int]]
    lengths: list[int]
    keys: list[int]

    def __post_init__(self) -> None:
        if not (len(self.prompts) == len(self.lengths) == len(self.keys)) or not self.prompts:
            raise ValueError("a decode batch needs one prompt, length and key per row")
        if any(n < 0 for n in self.lengths) or any(not p for p in self.prompts):
            raise ValueError("forced lengths must be >= 0 and prompts non-empty")


#: KV cache one decode batch may hold before it is split (bytes).
KV_BUDGET_BYTES = 16 << 30
#: Rows x query positions of one prefill forward (its mask is that many x the cache length, in bytes).
PREFILL_TOKENS = 32768


def kv_bytes_per_token(config) -> int:
    """KV cache bytes one token of one row takes (all layers, keys and values)."""
    heads = int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    size = torch.empty((), dtype=dtype).element_size()
    return int(config.num_hidden_layers) * 2 * heads * head_dim * size


def split_rows(prompt_lengths: list[int], forced: list[int], bytes_per_token: int, budget: int) -> list[list[int]]:
    """Row indices in sub-batches whose KV cache (rows x (longest prompt + longest forced) x bytes) fits `budget`.

    Rows go longest prompt first, so each sub-batch pads little; a row that alone exceeds
    the budget is a sub-batch alone.
    """
    order = sorted(range(len(prompt_lengths)), key=lambda i: (-prompt_lengths[i], -forced[i], i))
    out: list[list[int]] = []
    width = longest = 0
    for i in order:
        w, n = max(width, prompt_lengths[i]), max(longest, forced[i])
        if out and (len(out[-1]) + 1) * (w + n) * bytes_per_token <= budget:
            out[-1].append(i)
            width, longest = w, n
        else:
            out.append([i])
            width, longest = prompt_lengths[i], forced[i]
    return out


def prefill_chunks(rows: int, width: int, budget_tokens: int) -> list[tuple[int, int]]:
    """[start, end) query ranges of a prefill of `width` positions, each at most budget_tokens // rows long."""
    step = max(1, budget_tokens // max(rows, 1))
    return [(a, min(a + step, width)) for a in range(0, width, step)]


class Timeline:
    """When each row got its last token, without a host sync per step.

    On CUDA an event is recorded after each step where some row finishes, and the
    events are read once after the batch, anchored to one host clock reading taken after
    a sync at the start; on CPU the work is synchronous and the clock is read directly.
    """

    def __init__(self, device: torch.device, clock: Callable[[], float] | None) -> None:
        self.clock = clock
        self.cuda = device.type == "cuda" and clock is not None
        self.device = device
        self.marks: dict[int, object] = {}  # step -> event (CUDA) or clock reading (CPU)
        if self.cuda:
            torch.cuda.current_stream(device).synchronize()  # this thread's stream: the trainer's work is not ours
            self.t0 = clock()
            self.start = torch.cuda.Event(enable_timing=True)
            self.start.record()

    def mark(self, step: int) -> None:
        if self.clock is None:
            return
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks[step] = ev
        else:
            self.marks[step] = self.clock()

    def times(self, lengths: list[int], at_start: float | None) -> list[float | None]:
        if self.clock is None:
            return [None] * len(lengths)
        if self.cuda:
            torch.cuda.current_stream(self.device).synchronize()
            at = {s: self.t0 + self.start.elapsed_time(ev) / 1000.0 for s, ev in self.marks.items()}
        else:
            at = dict(self.marks)
        return [at_start if n == 0 else at[n - 1] for n in lengths]


def _base(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _forward_params(model) -> set[str]:
    return set(inspect.signature(_base(model).forward).parameters)


class Decoder:
    """Decodes batches on one model; `loop` picks how (auto: captured on CUDA, eager on CPU)."""

    LOOPS = ("auto", "graphed", "static", "eager")

    def __init__(self, model, banned: torch.Tensor, pad_id: int, *, loop: str = "auto",
                 capture_lock: threading.Lock | None = None, kv_budget_bytes: int = KV_BUDGET_BYTES,
                 prefill_tokens: int = PREFILL_TOKENS, step_experts: str | None = None) -> None:
        if loop not in self.LOOPS:
            raise ValueError(f"decode loop '{loop}' is not one of: {', '.join(self.LOOPS)}")
        self.model = model
        self.device = banned.device
        self.pad_id = int(pad_id)
        self.banned_bias = banned_bias(banned)
        self.token_hash = token_hashes(banned.numel(), self.device)
        if loop == "auto":
            loop = "graphed" if self.device.type == "cuda" else "eager"
        if loop == "graphed" and self.device.type != "cuda":
            raise ValueError("the graphed decode loop needs a CUDA device")
        self.loop = loop  # "static" = the graphed loop's static cache and step, run without capture
        self.cache_kw = cache_keyword(model)
        self.takes_cache_position = "cache_position" in _forward_params(model)
        self.graph_failure: str | None = None  # why capture failed (then the step runs uncaptured)
        self.kv_budget_bytes = int(kv_budget_bytes)
        self.prefill_tokens = int(prefill_tokens)
        self.kv_bytes_per_token = kv_bytes_per_token(_base(model).config)
        self.takes_logits_to_keep = "logits_to_keep" in _forward_params(model)
        #: experts implementation inside the decode step: dense where it can be registered, else batched_mm
        self.step_experts = step_experts or (experts.DENSE if experts.register() else "batched_mm")
        self.sub_batches = 0  # batches split by the KV budget, for the manifest
        self.experts_failure: str | None = None  # why step_experts could not be set (the step then keeps the model's)
        # Another thread must not synchronise the whole device while a capture is open.
        self.capture_lock = capture_lock or threading.Lock()

    @property
    def mode(self) -> str:
        if self.loop == "graphed" and self.graph_failure is not None:
            return "static"
        return self.loop

    @torch.inference_mode()
    def decode(self, batch: Batch, clock: Callable[[], float] | None = None) -> tuple[list[list[int]], list[float | None]]:
        """(completions, finish times) of every row; finish time None without a clock.

        The caller holds whatever lock keeps the weights still for the batch (PolicyBoard.model_lock).
        """
        at_start = clock() if clock is not None else None
        active = [i for i, n in enumerate(batch.lengths) if n > 0]
        outputs: list[list[int]] = [[] for _ in batch.prompts]
        if not active:
            return outputs, [at_start] * len(batch.prompts)
        times: list[float | None] = [at_start] * len(batch.prompts)
        parts = split_rows([len(batch.prompts[i]) for i in active], [batch.lengths[i] for i in active],
                           self.kv_bytes_per_token, self.kv_budget_bytes)
        if len(parts) > 1:
            self.sub_batches += 1
        for part in parts:
            rows = [active[k] for k in part]
            sub = Batch([batch.prompts[i] for i in rows], [batch.lengths[i] for i in rows], [batch.keys[i] for i in rows])
            if self.mode in ("graphed", "static"):
                tokens, finished = self._graphed(sub, clock, at_start)
            else:
                tokens, finished = self._eager(sub, clock, at_start)
            for row, i in enumerate(rows):
                outputs[i] = tokens[row]
                times[i] = finished[row]
        return outputs, times

    # -- shared pieces ----------------------------------------------------------------

    def _left_padded(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        valid = torch.zeros((len(prompts), width), dtype=torch.bool)
        for row, p in enumerate(prompts):
            ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
            valid[row, width - len(p):] = True
        return ids.to(self.device), valid.to(self.device)

    # -- eager loop (CPU, or no graphs) ---------------------------------------------------

    def _eager(self, batch: Batch, clock, at_start) -> tuple[list[list[int]], list[float | None]]:
        from transformers import DynamicCache

        model, device = self.model, self.device
        ids, valid = self._left_padded(batch.prompts)
        attn = valid.long()
        positions = (attn.cumsum(-1) - 1).clamp(min=0)
        try:
            cache = DynamicCache(config=_base(model).config)
        except TypeError:  # older signature without config
            cache = DynamicCache()
        keys = call_keys(batch.keys, device)
        lengths = list(batch.lengths)
        n_max = max(lengths)
        out = torch.zeros((len(lengths), n_max), dtype=torch.long, device=device)
        timeline = Timeline(device, clock)
        logits = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True,
                       **{self.cache_kw: cache}).logits[:, -1, :]
        rows = torch.arange(len(lengths), device=device)  # batch row -> original row
        live = list(range(len(lengths)))  # original rows still in the batch, in batch order
        last_pos = positions[:, -1]
        for step in range(n_max):
            s = torch.full((1,), step, dtype=torch.long, device=device)
            picked = sample(logits, keys, s, self.token_hash, self.banned_bias)
            out[rows, step] = picked
            if any(lengths[i] == step + 1 for i in live):
                timeline.mark(step)
            keep = [r for r, i in enumerate(live) if lengths[i] > step + 1]
            if not keep:
                break
            if len(keep) < len(live):
                index = torch.tensor(keep, dtype=torch.long, device=device)
                cache.batch_select_indices(index)
                picked, attn, last_pos, keys, rows = picked[index], attn[index], last_pos[index], keys[index], rows[index]
                live = [live[r] for r in keep]
            attn = torch.cat([attn, torch.ones((len(live), 1), dtype=attn.dtype, device=device)], dim=1)
            last_pos = last_pos + 1
            logits = model(input_ids=picked[:, None], attention_mask=attn, position_ids=last_pos[:, None],
                           use_cache=True, **{self.cache_kw: cache}).logits[:, -1, :]
        host = out.tolist()
        return [host[i][:n] for i, n in enumerate(lengths)], timeline.times(lengths, at_start)

    # -- captured loop (CUDA) -------------------------------------------------------------

    def _mask_value(self, allowed: torch.Tensor) -> torch.Tensor:
        """A 4-D mask the attention takes as it is: bool for sdpa, additive elsewhere."""
        base = _base(self.model)
        if getattr(base.config, "_attn_implementation", "sdpa") == "sdpa":
            return allowed
        dtype = next(base.parameters()).dtype
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)

    def _set_experts(self, implementation: str | None) -> str | None:
        """Switch the MoE experts' implementation (returns the previous one); None where unsupported."""
        base = _base(self.model)
        if not hasattr(base, "set_experts_implementation"):
            return None
        previous = getattr(base.config, "_experts_implementation", None)
        if implementation is not None and implementation != previous:
            try:
                base.set_experts_implementation(implementation)
            except (ValueError, ImportError, RuntimeError) as exc:
                self.experts_failure = f"{implementation}: {exc}".splitlines()[0][:300]
                log.warning("experts implementation %s not available: %s", implementation, exc)
                return None
        return previous

    def _graphed(self, batch: Batch, clock, at_start) -> tuple[list[list[int]], list[float | None]]:
        from transformers import StaticCache

        model, device = self.model, self.device
        ids, valid = self._left_padded(batch.prompts)
        n_rows, width = ids.shape
        lengths = list(batch.lengths)
        n_max = max(lengths)
        total = width + n_max
        cache = StaticCache(config=_base(model).config, max_cache_len=total)
        cols = torch.arange(total, device=device)
        prompt_ok = torch.zeros((n_rows, total), dtype=torch.bool, device=device)
        prompt_ok[:, :width] = valid
        positions = (valid.long().cumsum(-1) - 1).clamp(min=0)
        # Prefill in chunks of query positions: causal over the valid prompt positions; every
        # query also sees itself, so a padding row is never fully masked (which would put NaN
        # into the cache). Each chunk's mask is rows x chunk x cache length.
        keep = {"logits_to_keep": 1} if self.takes_logits_to_keep else {}
        for a, b in prefill_chunks(n_rows, width, self.prefill_tokens):
            q = torch.arange(a, b, device=device)
            mask = (prompt_ok[:, None, :] & (cols[None, None, :] <= q[None, :, None])) | \
                (cols[None, None, :] == q[None, :, None])
            extra = {"cache_position": q} if self.takes_cache_position else {}
            logits = model(input_ids=ids[:, a:b], attention_mask=self._mask_value(mask[:, None]),
                           position_ids=positions[:, a:b], use_cache=True, **{self.cache_kw: cache},
                           **extra, **keep).logits[:, -1, :]
            del mask

        # Device state the captured step reads and advances in place.
        keys = call_keys(batch.keys, device)
        out = torch.zeros((n_rows, n_max), dtype=torch.long, device=device)
        step = torch.zeros((1,), dtype=torch.long, device=device)
        cache_pos = torch.full((1,), width, dtype=torch.long, device=device)
        pos = positions[:, -1:].clone()
        tok = torch.zeros((n_rows, 1), dtype=torch.long, device=device)

        def take(logits_now: torch.Tensor) -> None:
            picked = sample(logits_now, keys, step, self.token_hash, self.banned_bias)
            out.index_copy_(1, step, picked[:, None])
            tok.copy_(picked[:, None])
            step.add_(1)

        def unit() -> None:
            """Forward the last token of every row at cache_pos, sample the next one, advance."""
            pos.add_(1)
            mask = prompt_ok | ((cols >= width) & (cols <= cache_pos))[None, :]
            kw = {"cache_position": cache_pos} if self.takes_cache_position else {}
            logits_now = model(input_ids=tok, attention_mask=self._mask_value(mask[:, None, None, :]), position_ids=pos,
                               use_cache=True, **{self.cache_kw: cache}, **kw).logits[:, -1, :]
            take(logits_now)
            cache_pos.add_(1)

        timeline = Timeline(device, clock)
        finishing = set(n - 1 for n in lengths)
        take(logits)
        if 0 in finishing:
            timeline.mark(0)
        done = 1
        previous = self._set_experts(self.step_experts)
        try:
            graph = None
            if self.mode == "graphed" and n_max - done > 3:
                # Warm-up steps are real steps (on a side stream, as capture wants); capture then
                # records one more without running it.
                side = torch.cuda.Stream(device)
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    for _ in range(2):
                        unit()
                        if done in finishing:
                            timeline.mark(done)
                        done += 1
                torch.cuda.current_stream(device).wait_stream(side)
                graph = self._capture(unit)
            while done < n_max:
                graph.replay() if graph is not None else unit()
                if done in finishing:
                    timeline.mark(done)
                done += 1
        finally:
            if previous is not None:
                self._set_experts(previous)
        host = out.tolist()
        return [host[i][:n] for i, n in enumerate(lengths)], timeline.times(lengths, at_start)

    def _capture(self, unit: Callable[[], None]):
        """Capture one step on a side stream.

        Not through `torch.cuda.graph`, whose entry synchronises the whole device and empties
        PyTorch's allocator cache: with the trainer on the same GPU that stalls the trainer
        at every batch and makes it allocate afresh (the trainer-rate drift of issue 27).
        """
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        try:
            with self.capture_lock, torch.cuda.stream(side):
                graph.capture_begin(capture_error_mode="thread_local")
                try:
                    unit()
                finally:
                    graph.capture_end()
        except Exception as exc:  # noqa: BLE001 - any capture failure falls back to eager replays of the same step
            self.graph_failure = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            log.warning("CUDA graph capture failed, decoding eagerly from now on: %s", self.graph_failure)
            return None
        torch.cuda.current_stream(self.device).wait_stream(side)
        return graph
