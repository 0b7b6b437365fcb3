"""One short line per completed update of a running benchmark, for the terminal.

A run's whole output goes to its log (rules/runs.smk); the run rule passes on to the
terminal only the lines that start with `PREFIX`, so a user sees each update as it
completes instead of a minute of silence. Lines go to stderr: a container run's output
is forwarded by the host line by line (container_run._stream_lines), so the same lines
reach the terminal from inside an image.
"""

from __future__ import annotations

import sys
from typing import Callable, TextIO

#: Start of every progress line; the run rule keeps exactly these lines (`grep '^PREFIX'`).
PREFIX = "bench progress:"


def run_label(backend: str, workload: str, trial: int) -> str:
    return f"{backend} {workload} trial{trial}"


def emit(text: str, stream: TextIO | None = None) -> None:
    """Print one progress line; a closed terminal never fails the run."""
    try:
        print(f"{PREFIX} {text}", file=stream or sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def update_printer(label: str, total_updates: int, stream: TextIO | None = None) -> Callable[[dict], None]:
    """The EvidenceWriter callback that prints an update row as one line."""

    def on_update(row: dict) -> None:
        emit(f"{label}: update {row['update']}/{total_updates} done at {row['completed_at']:.1f} s "
             f"({row['accepted_trajectories']} trajectories, {row['assistant_tokens']} assistant tokens)", stream)

    return on_update


def rates_text(summary: dict) -> str:
    """A summary's headline rates in one phrase, as the report's headline table shows them."""
    def rate(*keys: str) -> str:
        v: object = summary
        for k in keys:
            v = v.get(k) if isinstance(v, dict) else None
        return f"{v:,.4g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"

    text = (f"headline {rate('e2e', 'headline', 'trajectories_per_s')} trajectories/s, "
            f"{rate('e2e', 'headline', 'assistant_tokens_per_s')} assistant tokens/s; "
            f"trainer {rate('trainer', 'headline', 'assistant_tokens_per_s')} tokens/s")
    if summary.get("valid") is not True:
        codes = sorted({str(r).split(":", 1)[0] for r in summary.get("reasons") or []})
        return f"{text} (INVALID: {', '.join(codes) or 'no reason given'})"
    warnings = sorted({str(w).split(":", 1)[0] for w in summary.get("warnings") or []})
    return f"{text}" + (f" (warnings: {', '.join(warnings)})" if warnings else "")
