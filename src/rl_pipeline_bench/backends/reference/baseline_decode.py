"""The reference backend's first decode loop (sampler v1), kept only as benchmarks/bench_decode.py's baseline.

It syncs to the host every step (`.tolist()`), draws one `torch.multinomial` per row
from that row's own torch.Generator, and grows a DynamicCache: the loop the issue-22
measurements found host-bound on an H200. The pipeline decodes with `decode.Decoder`.
"""

from __future__ import annotations

from typing import Callable

import torch

from .policy import cache_keyword, new_cache


@torch.inference_mode()
def generate_forced(model, prompts: list[list[int]], lengths: list[int], banned: torch.Tensor,
                    generators: list[torch.Generator], pad_id: int,
                    clock: Callable[[], float] | None = None) -> tuple[list[list[int]], list[float | None]]:
    """Sample exactly lengths[i] tokens after prompts[i] for every row, batched.

    Returns (completions, finish_times); finish_times[i] is clock() when row i got its
    last token (None without a clock). Rows are left-padded and leave the batch (and its
    KV cache) when done.
    """
    if not (len(prompts) == len(lengths) == len(generators)) or not prompts:
        raise ValueError("generate_forced needs one prompt, length and generator per row")
    if any(n < 0 for n in lengths) or any(not p for p in prompts):
        raise ValueError("forced lengths must be >= 0 and prompts non-empty")
    device = banned.device
    outputs: list[list[int]] = [[] for _ in prompts]
    finish: list[float | None] = [None] * len(prompts)
    active = [i for i, n in enumerate(lengths) if n > 0]
    for i, n in enumerate(lengths):
        if n == 0 and clock is not None:
            finish[i] = clock()
    if not active:
        return outputs, finish

    width = max(len(prompts[i]) for i in active)
    ids = torch.full((len(active), width), int(pad_id), dtype=torch.long)
    attn = torch.zeros((len(active), width), dtype=torch.long)
    for row, i in enumerate(active):
        p = prompts[i]
        ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
        attn[row, width - len(p):] = 1
    ids, attn = ids.to(device), attn.to(device)
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    cache = new_cache(model)
    kw = cache_keyword(model)
    out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True, **{kw: cache})
    logits = out.logits[:, -1, :]
    last_pos = positions[:, -1]
    while True:
        probs = torch.softmax(logits.float().masked_fill(banned, float("-inf")), dim=-1)
        picked = torch.empty((len(active), 1), dtype=torch.long, device=device)
        for row, i in enumerate(active):
            picked[row, 0] = torch.multinomial(probs[row], 1, generator=generators[i])[0]
        values = picked[:, 0].tolist()
        keep_rows = []
        for row, i in enumerate(active):
            outputs[i].append(int(values[row]))
            if len(outputs[i]) >= lengths[i]:
                if clock is not None:
                    finish[i] = clock()
            else:
                keep_rows.append(row)
        if not keep_rows:
            return outputs, finish
        if len(keep_rows) < len(active):
            index = torch.tensor(keep_rows, dtype=torch.long, device=device)
            cache.batch_select_indices(index)
            picked, attn, last_pos = picked[index], attn[index], last_pos[index]
            active = [active[r] for r in keep_rows]
        attn = torch.cat([attn, torch.ones((len(active), 1), dtype=attn.dtype, device=device)], dim=1)
        last_pos = last_pos + 1
        out = model(input_ids=picked, attention_mask=attn, position_ids=last_pos[:, None], use_cache=True,
                    **{kw: cache})
        logits = out.logits[:, -1, :]


