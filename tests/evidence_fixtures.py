"""TEST FIXTURES ONLY: synthetic evidence directories with chosen numbers.

Nothing here is a measurement. `build_evidence` writes an evidence v1 directory through
the real EvidenceWriter with update times, counts, calls and trainer intervals that a
test chooses, so contract arithmetic can be checked against hand-computed values.
Other tests (report, pipeline) may reuse it: `from evidence_fixtures import build_evidence`.

Defaults (contract 5+15, headline 5, N = 20, ranks [0, 1], 4 trajectories offered):
  completed_at[u] = 3.0 * u
  accepted_trajectories[u] = u % 4 + 1
  assistant_tokens[u] = 100 * u
  intervals: rank 0 [c-2.5, c-1.0], rank 1 [c-2.0, c-0.5] with c = completed_at[u]
             (union 2.0 s per update, sum of durations 3.0 s); for c < 3 s inside [0, c]
  calls: per update one call per offered trajectory (one group), the first
         accepted_trajectories[u] of them accepted; completion == forced, the accepted
         ones splitting assistant_tokens[u] between them (the files agree, as the
         contract's reconciliation requires), the others 10 + t long; each call runs
         [c-3.0, c-2.8] ([0.1 c, 0.2 c] for c < 3 s, inside the run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rl_pipeline_bench.contract.settings import ContractSettings
from rl_pipeline_bench.evidence.store import EvidenceWriter
from rl_pipeline_bench.records.timestamps import new_run_id

_UNSET: Any = object()


def default_intervals(updates: Sequence[int], completed_at: Sequence[float],
                      ranks: Sequence[int]) -> list[tuple[int, int, float, float]]:
    """Per update and rank: overlapping intervals ending before the update's completion."""
    out = []
    for u, c in zip(updates, completed_at):
        for r in ranks:
            if c >= 3.0:
                out.append((r, u, c - 2.5 + 0.5 * r, c - 1.0 + 0.5 * r))
            else:  # too early for the 2.5 s pattern: keep the interval inside the run (from 0)
                out.append((r, u, c * (0.2 + 0.1 * r), c * (0.6 + 0.1 * r)))
    return out


def default_calls(updates: Sequence[int], completed_at: Sequence[float], accepted: Sequence[int],
                  offered: int, tokens: Sequence[int] | None = None) -> list[dict]:
    """Calls that agree with the updates' accepted counts and tokens (default tokens: 100 * u)."""
    tokens = list(tokens) if tokens is not None else [100 * u for u in updates]
    rows = []
    for u, c, a, k in zip(updates, completed_at, accepted, tokens):
        for t in range(offered):
            forced = (k // a + (k % a if t == 0 else 0)) if t < a else 10 + t
            rows.append(dict(update=u, group=0, trajectory=t, call=0, prompt_tokens=50,
                             forced_completion_tokens=forced, completion_tokens=forced,
                             accepted=t < a, started_at=c - 3.0 if c >= 3.0 else 0.1 * c,
                             finished_at=c - 2.8 if c >= 3.0 else 0.2 * c,
                             policy_version=max(u - 1, 0)))
    return rows


def build_evidence(
    root: Path,
    *,
    contract: dict | None = None,
    updates: Sequence[int] | None = None,
    completed_at: Sequence[float] | None = None,
    accepted: Sequence[int] | None = None,
    assistant_tokens: Sequence[int] | None = None,
    intervals: Sequence[tuple[int, int, float, float]] | None = None,
    calls: Sequence[dict] | None = None,
    trainer_ranks: Sequence[int] = (0, 1),
    offered_per_update: int = 4,
    status: str = "completed",
    error: str | None = None,
    manifest_contract: Any = _UNSET,
    manifest: dict | None = None,
    run_id: str | None = None,
) -> Path:
    """Write a synthetic evidence dir under `root`; returns its path.

    `status` is "completed" or "failed" (finished normally) or "running" (the process
    "died": flushed, never finished). `manifest_contract` replaces the manifest's
    contract object verbatim (None or a broken dict to test validation).
    """
    settings = ContractSettings(**(contract or {}))
    updates = list(updates) if updates is not None else list(range(1, settings.total_updates + 1))
    completed_at = list(completed_at) if completed_at is not None else [3.0 * u for u in updates]
    accepted = list(accepted) if accepted is not None else [u % 4 + 1 for u in updates]
    assistant_tokens = list(assistant_tokens) if assistant_tokens is not None else [100 * u for u in updates]
    if not len(updates) == len(completed_at) == len(accepted) == len(assistant_tokens):
        raise ValueError("fixture: updates, completed_at, accepted and assistant_tokens must have equal lengths")
    if intervals is None:
        intervals = default_intervals(updates, completed_at, trainer_ranks)
    if calls is None:
        calls = default_calls(updates, completed_at, accepted, offered_per_update, assistant_tokens)

    contract_obj = {
        **{k: getattr(settings, k) for k in ("warmup_updates", "measured_updates", "headline_updates")},
        "trainer_ranks": list(trainer_ranks),
        "offered_trajectories_per_update": offered_per_update,
        "offered_plan": {"groups_per_update": 1, "group_size": offered_per_update, "calls_per_trajectory": 1},
    }
    m = {
        "backend": "reference", "workload": "multi_turn", "suite": "fixture", "trial": 1,
        "contract": contract_obj if manifest_contract is _UNSET else manifest_contract,
        "model": {"id": "fixture/model", "revision": "0" * 40},
        "recipe_sha256": "a" * 64, "source_sha256": "b" * 64, "image": None, "gpus": [],
        "host": {"hostname": "fixture-host"}, "command": "fixture",
    }
    m.update(manifest or {})
    w = EvidenceWriter(root, run_id or new_run_id("fixture", "reference", "multi_turn", 1), m)
    if calls:
        w.add_calls(calls)
    for r, u, s, e in intervals:
        w.add_trainer_interval(r, u, s, e)
    for i, u in enumerate(updates):
        w.add_update(u, completed_at[i], accepted[i], assistant_tokens[i],
                     policy_version=u, mean_policy_age=0.5)
    if status == "running":  # simulate a process that died: data flushed, manifest never finished
        w.flush()
        w.logger.removeHandler(w._log_handler)
        w._log_handler.close()
    else:
        w.finish(status, error)
    return w.path
