"""The contract's settings: how many updates warm up, are measured, and form the headline."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class ContractSettings:
    """How many updates warm up, are measured, and form the headline (the last ones)."""

    warmup_updates: int = 5
    measured_updates: int = 15
    headline_updates: int = 5

    def __post_init__(self) -> None:
        for name in ("warmup_updates", "measured_updates", "headline_updates"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"contract setting {name} must be an integer >= 1, got {v!r}")
        if self.headline_updates > self.measured_updates:
            raise ValueError(
                f"contract setting headline_updates ({self.headline_updates}) exceeds measured_updates ({self.measured_updates})"
            )

    @property
    def total_updates(self) -> int:
        return self.warmup_updates + self.measured_updates

    @property
    def headline_first(self) -> int:
        return self.total_updates - self.headline_updates + 1

    @property
    def measured_first(self) -> int:
        return self.warmup_updates + 1

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> "ContractSettings":
        """Settings from a suite's or manifest's contract dict (extra keys ignored)."""
        missing = [k for k in ("warmup_updates", "measured_updates", "headline_updates") if k not in mapping]
        if missing:
            raise ValueError(f"contract lacks {', '.join(missing)}")
        return cls(mapping["warmup_updates"], mapping["measured_updates"], mapping["headline_updates"])

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "total_updates": self.total_updates}
