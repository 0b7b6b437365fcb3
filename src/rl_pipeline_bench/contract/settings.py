"""The contract's settings: the one home of N, the default 5/15/5 and the windows' bounds.

Runs (the spec, the runner, the drivers), summaries (the contract), infrastructure
summaries and the report all ask this class; nothing else adds warmup and measured
updates or says where a window starts. Standard library only, so config validation and
every layer above the contract can import it.

With the defaults (5 warmup + 15 measured, headline 5) N = 20 and:
- headline window: completion of update 15 to completion of update 20, counting updates 16-20;
- measured window: completion of update 5 to completion of update 20, counting updates 6-20;
- trainer window: the trainer intervals tagged with the headline updates 16-20.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

#: The settings' keys, in the order they are written and shown.
KEYS = ("warmup_updates", "measured_updates", "headline_updates")


@dataclass(frozen=True)
class ContractSettings:
    """How many updates warm up, are measured, and form the headline (the last ones)."""

    warmup_updates: int = 5
    measured_updates: int = 15
    headline_updates: int = 5

    def __post_init__(self) -> None:
        for name in KEYS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"contract setting {name} must be an integer >= 1, got {v!r}")
        if self.headline_updates > self.measured_updates:
            raise ValueError(
                f"contract setting headline_updates ({self.headline_updates}) exceeds measured_updates ({self.measured_updates})"
            )

    @property
    def total_updates(self) -> int:
        """N = warmup + measured: the updates a run trains and the contract counts."""
        return self.warmup_updates + self.measured_updates

    @property
    def headline_first(self) -> int:
        return self.total_updates - self.headline_updates + 1

    @property
    def measured_first(self) -> int:
        return self.warmup_updates + 1

    @property
    def headline_window(self) -> tuple[int, int]:
        """(first, last) update counted by the headline rates; the window opens at completion first-1."""
        return self.headline_first, self.total_updates

    @property
    def measured_window(self) -> tuple[int, int]:
        """(first, last) update counted by the measured rates; the window opens at completion first-1."""
        return self.measured_first, self.total_updates

    @property
    def trainer_window(self) -> tuple[int, int]:
        """(first, last) update whose trainer intervals the trainer rate unites: the headline updates."""
        return self.headline_window

    @property
    def is_default(self) -> bool:
        return self == ContractSettings()

    def window_of(self, update: int) -> str:
        """The window an update belongs to: warmup, measured, headline, or beyond (extra offered work)."""
        if update <= self.warmup_updates:
            return "warmup"
        if update > self.total_updates:
            return "beyond"
        return "headline" if update >= self.headline_first else "measured"

    def describe(self) -> str:
        """One sentence for people: the counts, N, and the headline window's bounds."""
        first, last = self.headline_window
        return (f"{self.warmup_updates} warmup + {self.measured_updates} measured updates (N = {self.total_updates}); "
                f"headline = last {self.headline_updates} (updates {first}–{last}, window from completion "
                f"{first - 1} to {last})")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> "ContractSettings":
        """Settings from a spec's or manifest's contract dict (extra keys ignored); all three keys required."""
        missing = [k for k in KEYS if k not in mapping]
        if missing:
            raise ValueError(f"contract lacks {', '.join(missing)}")
        return cls(*(mapping[k] for k in KEYS))

    @classmethod
    def recorded(cls, mapping: Any) -> "ContractSettings | None":
        """The settings a summary or manifest records, or None when they are missing or unusable."""
        try:
            return cls.from_mapping(mapping)
        except (TypeError, ValueError):
            return None

    @classmethod
    def with_defaults(cls, mapping: Mapping[str, Any] | None) -> "ContractSettings":
        """Settings from a suite's `contract:` section, the defaults filling the keys it leaves out."""
        given = {f.name: mapping[f.name] for f in fields(cls) if mapping and f.name in mapping}
        return cls(**given)

    def settings(self) -> dict[str, int]:
        """The three settings as a dict (what a spec and a manifest record)."""
        return {k: getattr(self, k) for k in KEYS}

    def as_dict(self) -> dict[str, int]:
        """The settings plus N, as a summary records them."""
        return {**self.settings(), "total_updates": self.total_updates}
