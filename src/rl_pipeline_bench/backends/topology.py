"""The contract's training layout and LoRA constants, in the terms a backend descriptor uses.

A bottom module of the backends wing: descriptors name a `Topology`; the checks of a
run spec against a descriptor are `suite_checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONTRACT_LORA_RANK = 8
LORA_ALPHA = 32
#: Longest sequence (prompt + completion) the contract's framework runs train on.
MAX_SEQ_LENGTH = 131072
#: A driver's manifest `trainer_timing.source` (and the summary's `trainer.headline.interval_source`)
#: when its framework keeps no per-rank trainer timing and it recorded one controller-side
#: interval per step as rank 0 (docs/validation.md).
CONTROLLER_INTERVAL = "controller_interval"


@dataclass(frozen=True)
class Topology:
    """Training-side Megatron layout plus the inference GPU count."""

    train_gpus: int
    inference_gpus: int
    tp: int
    cp: int
    ep: int
    pp: int = 1
    etp: int = 1

    @property
    def dp(self) -> int:
        return self.train_gpus // (self.tp * self.cp * self.pp)

    def problems(self) -> list[str]:
        """Why Megatron could not lay this out (empty when it can)."""
        out: list[str] = []
        for name in ("tp", "cp", "ep", "pp", "etp", "train_gpus", "inference_gpus"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be >= 1 (got {getattr(self, name)})")
        if out:
            return out
        model_parallel = self.tp * self.cp * self.pp
        if self.train_gpus % model_parallel:
            out.append(f"{self.train_gpus} training GPUs are not a multiple of TP*CP*PP = {model_parallel}")
        # Expert parallelism is carved out of the TP*CP*DP ranks of one pipeline stage.
        elif (self.tp * self.cp * self.dp) % (self.etp * self.ep):
            out.append(
                f"EP*ETP = {self.ep * self.etp} does not divide TP*CP*DP = {self.tp * self.cp * self.dp} "
                f"on {self.train_gpus} training GPUs"
            )
        return out

    def label(self) -> str:
        return f"TP{self.tp} CP{self.cp} EP{self.ep} DP{self.dp}"


def lora_rank(spec: Any) -> int:
    """The suite's LoRA rank (its `rank` key), else the contract's 8."""
    return int(spec.get("rank", CONTRACT_LORA_RANK))


def is_supplemental(spec: Any) -> bool:
    """A LoRA rank other than the contract's 8 is a supplemental variant, reported apart."""
    return lora_rank(spec) != CONTRACT_LORA_RANK
