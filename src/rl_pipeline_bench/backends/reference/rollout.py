"""Rollout side of the reference backend: forced-length sampling and the rollout worker.

A call's completion length is forced the way an inference server does it with
`min_tokens = max_tokens = forced` and `ignore_eos`: every special token (EOS among
them) is masked out of the sampling distribution, and decoding stops after exactly
`forced` sampled tokens. The count recorded is the number of tokens that came out.
Sampling uses one seeded torch.Generator per call (a pure function of the call's plan
identity), never the global RNG that the trainer thread shares.

The trajectories of a group are decoded together, one batched forward per step, with
rows leaving the batch as they reach their length (continuous batching in miniature).
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd
import torch

from ... import render
from .policy import cache_keyword, new_cache


class Stopped(Exception):
    """The pipeline is shutting down (the other side failed); leave quietly."""


@dataclass
class CallResult:
    call: int
    prompt_ids: list[int]
    completion_ids: list[int]
    forced: int
    policy_version: int
    started_at: float
    finished_at: float


@dataclass
class TrajectoryResult:
    trajectory: int
    calls: list[CallResult] = field(default_factory=list)

    @property
    def first_version(self) -> int:
        """Policy version at the trajectory's first call: what its policy age is measured from."""
        return self.calls[0].policy_version

    @property
    def completion_tokens(self) -> int:
        return sum(len(c.completion_ids) for c in self.calls)


@dataclass
class GroupResult:
    update: int
    group: int
    trajectories: list[TrajectoryResult]

    def call_rows(self, accepted: bool) -> list[dict[str, Any]]:
        """calls.parquet rows for this group (evidence v1 columns plus `update`)."""
        return [
            {
                "group": self.group, "trajectory": t.trajectory, "call": c.call,
                "prompt_tokens": len(c.prompt_ids), "forced_completion_tokens": c.forced,
                "completion_tokens": len(c.completion_ids), "accepted": bool(accepted),
                "started_at": c.started_at, "finished_at": c.finished_at,
                "policy_version": c.policy_version, "update": self.update,
            }
            for t in self.trajectories for c in t.calls
        ]


class PolicyBoard:
    """Shared state between rollout and trainer: the published version and the rollout model lock.

    The rollout holds `model_lock` for a whole (batched) call, and publication takes it
    too, so an adapter is never swapped in the middle of a call.
    """

    def __init__(self) -> None:
        self.model_lock = threading.Lock()
        self._cond = threading.Condition()
        self._version = 0
        self.stop = threading.Event()

    @property
    def version(self) -> int:
        with self._cond:
            return self._version

    def wait_for_version(self, minimum: int) -> None:
        """Block until the published version reaches `minimum` (the staleness gate)."""
        with self._cond:
            while self._version < minimum:
                if self.stop.is_set():
                    raise Stopped()
                self._cond.wait(0.2)

    def publish(self, copy_weights: Callable[[], Any]) -> int:
        """Copy new weights into the rollout model between calls and bump the version."""
        with self.model_lock:
            copy_weights()
            with self._cond:
                self._version += 1
                self._cond.notify_all()
                return self._version

    def halt(self) -> None:
        self.stop.set()
        with self._cond:
            self._cond.notify_all()


def banned_token_mask(tokenizer, vocab_size: int, device: torch.device) -> torch.Tensor:
    """True for ids that must never be sampled: special tokens, <unk>, and ids beyond the tokenizer."""
    banned = set(int(i) for i in tokenizer.all_special_ids)
    for tid, tok in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).items():
        if getattr(tok, "special", False):
            banned.add(int(tid))
    if tokenizer.unk_token_id is not None:
        banned.add(int(tokenizer.unk_token_id))
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    mask[[i for i in banned if i < vocab_size]] = True
    mask[len(tokenizer):] = True
    if bool(mask.all()):
        raise ValueError("every token id is banned; nothing can be sampled")
    return mask.to(device)


def rollout_seed(workload: str, seed: int, update: int, group: int, trajectory: int, call: int) -> int:
    """Sampling seed of one call: sha256 of its plan identity (63 bits, torch.Generator-safe)."""
    key = json.dumps(["rl-bench/reference-rollout/v1", workload, int(seed), int(update), int(group),
                      int(trajectory), int(call)])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") >> 1


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


class RolloutWorker:
    """Walks the plan in (update, group) order and generates every call, then hands groups over.

    Staleness gate: a group of update u starts only once the published policy version is
    at least u - 1 - max_policy_age, so no trajectory can be older than the limit when the
    trainer (then at version u - 1) consumes it.
    """

    def __init__(self, *, model, tokenizer, plan: pd.DataFrame, board: PolicyBoard, out: "queue.Queue[GroupResult]",
                 banned: torch.Tensor, clock: Callable[[], float], workload: str, seed: int,
                 max_policy_age: int, log) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.plan = plan
        self.board = board
        self.out = out
        self.banned = banned
        self.clock = clock
        self.workload = workload
        self.seed = int(seed)
        self.max_policy_age = int(max_policy_age)
        self.log = log
        self.partial: GroupResult | None = None  # a group in progress, for evidence on failure
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_id = int(pad if pad is not None else 0)

    def run(self) -> None:
        for (update, group), rows in self.plan.groupby(["update", "group"], sort=True):
            self.board.wait_for_version(int(update) - 1 - self.max_policy_age)
            if self.board.stop.is_set():
                raise Stopped()
            self.out.put(self.run_group(int(update), int(group), rows))

    def run_group(self, update: int, group: int, rows: pd.DataFrame) -> GroupResult:
        by_traj = {int(t): r.sort_values("call").reset_index(drop=True) for t, r in rows.groupby("trajectory", sort=True)}
        for t, r in by_traj.items():
            if r["call"].tolist() != list(range(len(r))):
                raise ValueError(f"plan update {update} group {group} trajectory {t}: calls {r['call'].tolist()} are not 0..{len(r) - 1}")
        result = GroupResult(update, group, [TrajectoryResult(t) for t in by_traj])
        self.partial = result
        trajs = {t.trajectory: t for t in result.trajectories}
        n_calls = max(len(r) for r in by_traj.values())
        for call in range(n_calls):
            members = [t for t, r in by_traj.items() if call < len(r)]
            prompts, lengths, gens = [], [], []
            for t in members:
                previous = [c.completion_ids for c in trajs[t].calls]
                prompts.append(render.prompt_ids(self.tokenizer, by_traj[t], call, previous))
                lengths.append(int(by_traj[t]["forced_completion_tokens"].iloc[call]))
                g = torch.Generator(device=self.banned.device)
                g.manual_seed(rollout_seed(self.workload, self.seed, update, group, t, call))
                gens.append(g)
            if self.board.stop.is_set():
                raise Stopped()
            with self.board.model_lock:
                version = self.board.version
                started = self.clock()
                outs, finished = generate_forced(self.model, prompts, lengths, self.banned, gens, self.pad_id, self.clock)
            for k, t in enumerate(members):
                trajs[t].calls.append(CallResult(call, prompts[k], outs[k], lengths[k], version, started, finished[k]))
        self.partial = None
        return result
