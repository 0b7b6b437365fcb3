"""Rollout side of the reference backend: forced-length sampling and the rollout worker.

A call's completion length is forced the way an inference server does it with
`min_tokens = max_tokens = forced` and `ignore_eos`: every special token (EOS among
them) is masked out of the sampling distribution, and decoding stops after exactly
`forced` sampled tokens. The count recorded is the number of tokens that came out.
Sampling is keyed by each call's plan identity (`rollout_seed`) through decode.py's
counter-based sampler, never a shared RNG, so a call's tokens do not depend on the calls
it is batched with.

As an inference server does, the worker decodes together the next call of every
trajectory in flight, across groups and updates, as far as the staleness gate lets
groups start (and up to `decode_batch_rows` rows); a trajectory's next call joins a
later batch once its previous call is back. Groups are handed to the trainer in plan
order as they complete.
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

from ...plan import render
from .decode import SAMPLER, Batch, Decoder


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
        #: Held while the rollout captures a CUDA graph and while the trainer synchronises the
        #: whole device: a device-wide sync during another thread's capture invalidates it (an error).
        self.device_lock = threading.Lock()
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
    """Sampling key of one call: sha256 of its plan identity and the sampler version (63 bits)."""
    key = json.dumps([SAMPLER, workload, int(seed), int(update), int(group),
                      int(trajectory), int(call)])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") >> 1


@dataclass
class _InFlight:
    """A group being generated: its plan rows per trajectory and the calls done so far."""

    result: GroupResult
    plan: dict[int, pd.DataFrame]

    @property
    def trajectories(self) -> dict[int, TrajectoryResult]:
        return {t.trajectory: t for t in self.result.trajectories}

    def next_calls(self) -> list[tuple[int, int]]:
        """(trajectory, call) of every trajectory that has a call left."""
        done = self.trajectories
        return [(t, len(done[t].calls)) for t, rows in self.plan.items() if len(done[t].calls) < len(rows)]

    @property
    def complete(self) -> bool:
        return not self.next_calls()


class RolloutWorker:
    """Generates the plan's calls in batches across the groups in flight and hands groups over in plan order.

    Staleness gate: a group of update u starts only once the published policy version is
    at least u - 1 - max_policy_age, so no trajectory can be older than the limit when the
    trainer (then at version u - 1) consumes it. Groups start in plan order.
    """

    def __init__(self, *, model, tokenizer, plan: pd.DataFrame, board: PolicyBoard, out: "queue.Queue[GroupResult]",
                 banned: torch.Tensor, clock: Callable[[], float], workload: str, seed: int,
                 max_policy_age: int, log, batch_rows: int = 64, decode_loop: str = "auto") -> None:
        self.tokenizer = tokenizer
        self.plan = plan
        self.board = board
        self.out = out
        self.clock = clock
        self.workload = workload
        self.seed = int(seed)
        self.max_policy_age = int(max_policy_age)
        self.batch_rows = int(batch_rows)
        self.log = log
        self.in_flight: list[_InFlight] = []  # groups in progress, in plan order (evidence on failure)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.decoder = Decoder(model, banned, int(pad if pad is not None else 0), loop=decode_loop,
                               capture_lock=board.device_lock)
        self.batches = 0

    def _gate(self, update: int) -> int:
        return update - 1 - self.max_policy_age

    def _start(self, update: int, group: int, rows: pd.DataFrame) -> _InFlight:
        by_traj = {int(t): r.sort_values("call").reset_index(drop=True) for t, r in rows.groupby("trajectory", sort=True)}
        for t, r in by_traj.items():
            if r["call"].tolist() != list(range(len(r))):
                raise ValueError(f"plan update {update} group {group} trajectory {t}: calls {r['call'].tolist()} are not 0..{len(r) - 1}")
        return _InFlight(GroupResult(update, group, [TrajectoryResult(t) for t in by_traj]), by_traj)

    def run(self) -> None:
        pending = [(int(u), int(g), rows) for (u, g), rows in self.plan.groupby(["update", "group"], sort=True)]
        pending.reverse()  # pop() takes the next group in plan order
        while pending or self.in_flight:
            if self.board.stop.is_set():
                raise Stopped()
            if not self.in_flight:
                self.board.wait_for_version(self._gate(pending[-1][0]))
            rows_in_flight = sum(len(g.plan) for g in self.in_flight)
            while pending and self.board.version >= self._gate(pending[-1][0]) and (
                    not self.in_flight or rows_in_flight + pending[-1][2]["trajectory"].nunique() <= self.batch_rows):
                group = self._start(*pending.pop())
                self.in_flight.append(group)
                rows_in_flight += len(group.plan)
            self.decode_round()
            while self.in_flight and self.in_flight[0].complete:
                self.out.put(self.in_flight.pop(0).result)

    def decode_round(self) -> None:
        """One batch: the next call of every trajectory in flight."""
        members, prompts, lengths, keys = [], [], [], []
        for group in self.in_flight:
            trajs = group.trajectories
            for t, call in group.next_calls():
                previous = [c.completion_ids for c in trajs[t].calls]
                plan = group.plan[t]
                members.append((group, t, call))
                prompts.append(render.prompt_ids(self.tokenizer, plan, call, previous))
                lengths.append(int(plan["forced_completion_tokens"].iloc[call]))
                r = group.result
                keys.append(rollout_seed(self.workload, self.seed, r.update, r.group, t, call))
        with self.board.model_lock:
            version = self.board.version
            started = self.clock()
            outs, finished = self.decoder.decode(Batch(prompts, lengths, keys), self.clock)
        self.batches += 1
        for k, (group, t, call) in enumerate(members):
            group.trajectories[t].calls.append(CallResult(call, prompts[k], outs[k], lengths[k], version, started, finished[k]))
