"""Trainer side of the reference backend: synthetic reward, group-relative policy gradient, publication.

Reward (synthetic, deterministic): the fraction of a trajectory's completion tokens
(all its calls) whose id lies in the lower half of the vocabulary, `id < vocab_size // 2`.
It depends only on the generated tokens, so the policy can learn it and every run with
the same outputs scores the same.

Objective: advantages are group-relative, A_i = (r_i - mean(r)) / (std(r) + 1e-6) over
a group's accepted trajectories; the loss is -sum(A_i * log p(token)) over every
completion token of every call, divided by the update's token count (prompt tokens are
masked). Every call of the update goes through the model in a few large padded chunks
(longest first), with the loss summed on the device, so the host never waits on the
GPU inside an update. One optimizer step per update, then the adapter is published.

Policy age of a trajectory = the trainer's policy version (u - 1 while training update
u) minus the version its first call was generated with. A group whose mean age exceeds
`max_policy_age`, or any of whose calls came out at a length other than forced, is
rejected: its calls are recorded with accepted=False and it is not trained on.
"""

from __future__ import annotations

import math
import queue
import statistics
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .rollout import GroupResult, PolicyBoard, Stopped

REWARD_DESCRIPTION = "fraction of completion tokens with id < vocab_size // 2 (per trajectory, all calls)"
ADV_EPS = 1e-6


def reward(completion_ids: list[int], vocab_size: int) -> float:
    """The synthetic reward of one trajectory's completion tokens (see module docstring)."""
    if not completion_ids:
        return 0.0
    half = vocab_size // 2
    return sum(1 for t in completion_ids if t < half) / len(completion_ids)


def group_advantages(rewards: list[float]) -> list[float]:
    """Group-relative advantages: reward minus the group mean, over the group's std."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    std = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
    return [(r - mean) / (std + ADV_EPS) for r in rewards]


def policy_ages(group: GroupResult, trainer_version: int) -> list[int]:
    return [trainer_version - t.first_version for t in group.trajectories]


def acceptance(group: GroupResult, trainer_version: int, max_policy_age: float) -> tuple[bool, str]:
    """(accepted, reason): reject stale groups and any group with a call of the wrong length."""
    for t in group.trajectories:
        for c in t.calls:
            if len(c.completion_ids) != c.forced:
                return False, (f"trajectory {t.trajectory} call {c.call} produced {len(c.completion_ids)} tokens, "
                               f"forced {c.forced}")
    ages = policy_ages(group, trainer_version)
    mean_age = sum(ages) / len(ages)
    if mean_age > max_policy_age:
        return False, f"mean policy age {mean_age:.2f} exceeds the limit {max_policy_age}"
    return True, ""


def completion_logprobs(model, sequences: list[tuple[list[int], list[int]]], banned: torch.Tensor,
                        pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs of each completion under `model` (right-padded batch).

    Returns (logp [B, L-1], mask [B, L-1]) where mask marks completion tokens only.
    The distribution is the one the rollout sampled from (special tokens masked).
    """
    device = banned.device
    width = max(len(p) + len(c) for p, c in sequences)
    ids = torch.full((len(sequences), width), int(pad_id), dtype=torch.long)
    attn = torch.zeros((len(sequences), width), dtype=torch.long)
    mask = torch.zeros((len(sequences), width - 1), dtype=torch.bool)
    for row, (p, c) in enumerate(sequences):
        seq = list(p) + list(c)
        ids[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
        attn[row, :len(seq)] = 1
        mask[row, len(p) - 1:len(seq) - 1] = True  # logits at position j predict token j + 1
    ids, attn, mask = ids.to(device), attn.to(device), mask.to(device)
    logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, :-1, :].float()
    logp = torch.log_softmax(logits.masked_fill(banned, float("-inf")), dim=-1)
    target = ids[:, 1:].unsqueeze(-1)
    return logp.gather(-1, target).squeeze(-1).masked_fill(~mask, 0.0), mask


@dataclass
class StepStats:
    accepted_groups: int = 0
    rejected_groups: int = 0
    accepted_trajectories: int = 0
    assistant_tokens: int = 0
    mean_reward: float = float("nan")
    loss: float = float("nan")
    mean_policy_age: float = float("nan")


#: Padded tokens per forward/backward chunk of an update (the whole update's calls, longest first).
CHUNK_TOKENS = 16384


def token_chunks(samples: list[tuple[list[int], list[int], float]], budget: int) -> list[list[tuple[list[int], list[int], float]]]:
    """Samples (prompt, completion, advantage) in chunks whose padded size (rows x longest) stays within `budget`.

    Longest first, so each chunk pads little; a sample longer than the budget is a chunk alone.
    """
    ordered = sorted(samples, key=lambda s: len(s[0]) + len(s[1]), reverse=True)
    chunks: list[list] = []
    for sample in ordered:
        width = len(sample[0]) + len(sample[1])
        if chunks and (len(chunks[-1]) + 1) * max(width, len(chunks[-1][0][0]) + len(chunks[-1][0][1])) <= budget:
            chunks[-1].append(sample)
        else:
            chunks.append([sample])
    return chunks


class Trainer:
    """Consumes the plan's groups update by update, trains, publishes, and records evidence."""

    def __init__(self, *, model, params: dict[str, torch.nn.Parameter], publish: Callable[[], Any],
                 board: PolicyBoard, inbox: "queue.Queue[GroupResult]", expected_groups: dict[int, list[int]],
                 banned: torch.Tensor, pad_id: int, vocab_size: int, learning_rate: float,
                 max_policy_age: float, writer, log, offered_per_update: dict[int, int],
                 on_first_step: Callable[[dict[str, torch.nn.Parameter]], None] | None = None) -> None:
        self.model = model
        self.params = params
        self.publish = publish
        self.board = board
        self.inbox = inbox
        self.expected_groups = expected_groups
        self.banned = banned
        self.pad_id = int(pad_id)
        self.vocab_size = int(vocab_size)
        self.max_policy_age = float(max_policy_age)
        self.writer = writer
        self.log = log
        self.offered = offered_per_update
        self.on_first_step = on_first_step
        self.chunk_tokens = CHUNK_TOKENS
        self.optimizer = torch.optim.AdamW(list(params.values()), lr=float(learning_rate), weight_decay=0.0)
        self.totals = {"trajectories": 0, "tokens": 0}
        #: Groups taken from the inbox whose calls are not yet in the evidence (recorded as not accepted on failure).
        self.holding: list[GroupResult] = []

    def _next_group(self) -> GroupResult:
        while True:
            if self.board.stop.is_set():
                raise Stopped()
            try:
                return self.inbox.get(timeout=0.2)
            except queue.Empty:
                continue

    def run(self) -> None:
        for update in sorted(self.expected_groups):
            groups = []
            for g in self.expected_groups[update]:
                got = self._next_group()
                if (got.update, got.group) != (update, g):
                    raise RuntimeError(f"trainer expected update {update} group {g}, got update {got.update} group {got.group}")
                groups.append(got)
                self.holding = groups
            self.train_update(update, groups)

    def train_update(self, update: int, groups: list[GroupResult]) -> StepStats:
        clock = self.writer.clock
        trainer_version = self.board.version  # the policy the gradient is taken on (u - 1)
        stats = StepStats()
        start = clock()
        accepted, rows = [], []
        for g in groups:
            ok, why = acceptance(g, trainer_version, self.max_policy_age)
            if not ok:
                stats.rejected_groups += 1
                self.log.warning("update %d: rejected group %d: %s", update, g.group, why)
            else:
                accepted.append(g)
            rows.extend(g.call_rows(ok))
        total_tokens = sum(t.completion_tokens for g in accepted for t in g.trajectories)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        rewards_all, ages, samples = [], [], []
        for g in accepted:
            rewards = [reward([tok for c in t.calls for tok in c.completion_ids], self.vocab_size) for t in g.trajectories]
            advs = group_advantages(rewards)
            rewards_all += rewards
            ages += policy_ages(g, trainer_version)
            samples += [(c.prompt_ids, c.completion_ids, a) for t, a in zip(g.trajectories, advs, strict=True)
                        for c in t.calls]
        loss_sum = torch.zeros((), dtype=torch.float32, device=self.banned.device)
        for chunk in token_chunks(samples, self.chunk_tokens):
            logp, mask = completion_logprobs(self.model, [(p, c) for p, c, _ in chunk], self.banned, self.pad_id)
            adv = torch.tensor([a for _, _, a in chunk], dtype=logp.dtype, device=logp.device)
            loss = -(logp * adv[:, None]).sum() / max(total_tokens, 1)
            loss.backward()
            loss_sum += loss.detach().float()  # on the device: no host sync between chunks
        if accepted and total_tokens > 0:
            torch.nn.utils.clip_grad_norm_(list(self.params.values()), 1.0)
            if self.on_first_step is not None:
                self.on_first_step(self.params)
                self.on_first_step = None
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.banned.device.type == "cuda":
            # This thread's stream only (pipeline.on_own_stream): the interval ends when the
            # trainer's own work does, not when the rollout's queued decode does.
            with self.board.device_lock:  # never inside the rollout's graph capture (decode.Decoder)
                torch.cuda.current_stream(self.banned.device).synchronize()
        end = clock()
        self.writer.add_trainer_interval(0, update, start, end)

        version = self.publish()
        stats.accepted_groups = len(accepted)
        stats.accepted_trajectories = sum(len(g.trajectories) for g in accepted)
        stats.assistant_tokens = total_tokens
        stats.mean_reward = sum(rewards_all) / len(rewards_all) if rewards_all else float("nan")
        stats.loss = float(loss_sum)
        stats.mean_policy_age = sum(ages) / len(ages) if ages else float("nan")
        self.log.info(
            "train update %d: version %d, groups %d accepted / %d rejected, trajectories %d, tokens %d, "
            "mean reward %.4f, loss %.5f, mean policy age %.2f, trainer %.3fs",
            update, version, stats.accepted_groups, stats.rejected_groups, stats.accepted_trajectories,
            stats.assistant_tokens, stats.mean_reward, stats.loss, stats.mean_policy_age, end - start,
        )
        self.writer.add_calls(rows)
        self.holding = []
        completed_at = clock()
        self.writer.add_update(update, completed_at, stats.accepted_trajectories, stats.assistant_tokens,
                               version, stats.mean_policy_age)
        self.totals["trajectories"] += stats.accepted_trajectories
        self.totals["tokens"] += stats.assistant_tokens
        rate = (lambda x: x / completed_at if completed_at > 0 else math.nan)
        self.log.info(
            "update %d/%d completed at %.2fs: %d/%d trajectories accepted; so far %.3f trajectories/s, %.1f assistant tokens/s",
            update, len(self.expected_groups), completed_at, stats.accepted_trajectories, self.offered.get(update, 0),
            rate(self.totals["trajectories"]), rate(self.totals["tokens"]),
        )
        return stats
