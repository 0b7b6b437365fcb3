"""A run's evidence checked against the run spec and the offered plan it is summarized under.

The manifest says which spec (id, hash) and workload a run belongs to, but a label is
only a label: evidence relabelled from one workload to another (or another backend,
trial or suite) would summarise as valid. The spec fixes the suite, its backends,
workloads and trials, and the plan of each workload is a pure function of the spec, so
every recorded call's forced completion length must be the plan's for that (update,
group, trajectory, call). A mismatch is the reason `plan_mismatch` (docs/validation.md).

A pure rule: the caller hands in the spec and the plan (the workflow's own files); this
module finds no file.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

import pandas as pd

from ..plan.call_identity import CALL_KEYS, row_label

CODE = "plan_mismatch"  # described in contract/reasons.py with every other code
_KEYS = list(CALL_KEYS)


class NamedSpec(Protocol):
    """What the rule reads of a run spec (rl_pipeline_bench.settings.spec.RunSpec)."""

    @property
    def id(self) -> str: ...

    @property
    def hash(self) -> str: ...

    @property
    def settings(self) -> Mapping[str, Any]: ...


def check_plan_identity(manifest: Mapping[str, Any] | None, calls: pd.DataFrame, spec: NamedSpec | None,
                        plan: pd.DataFrame | None, reasons: list[str]) -> None:
    """Append `plan_mismatch` when the evidence is not a run of `spec` and of `plan`'s workload.

    spec: the run spec the run is summarized under; None leaves the evidence unchecked
    (a summary of a directory on its own). plan: that spec's offered plan of the workload
    the run is summarized under; None checks the labels only.
    """
    if not isinstance(manifest, Mapping) or spec is None:
        return
    s = spec.settings
    problems = []
    named = manifest.get("spec")
    if not isinstance(named, Mapping) or named.get("hash") != spec.hash:
        got = named.get("hash") if isinstance(named, Mapping) else None
        problems.append(f"the manifest names spec hash {got!r}, not spec {spec.id}'s {spec.hash}")
    for key, allowed in (("suite", [s["suite"]]), ("backend", s["backends"]), ("workload", s["workloads"])):
        if manifest.get(key) not in allowed:
            problems.append(f"{key} {manifest.get(key)!r} is not one of spec {spec.id}'s {allowed}")
    trial = manifest.get("trial")
    # trials are not part of a spec's identity (docs/run-spec.md): any trial >= 1 is a run of the spec
    if not isinstance(trial, int) or isinstance(trial, bool) or trial < 1:
        problems.append(f"trial {trial!r} is not a trial number (1, 2, ...)")
    if not problems and plan is not None:
        problems += _plan_problems(manifest["workload"], calls, plan)
    if problems:
        reasons.append(f"{CODE}: " + "; ".join(problems))


def _plan_problems(workload: str, calls: pd.DataFrame, plan: pd.DataFrame) -> list[str]:
    planned = sorted(set(plan["workload"].astype(str))) if "workload" in plan.columns else []
    if planned != [workload]:
        return [f"the run is summarized against workload {planned}'s plan, but its manifest says {workload!r}"]
    if not len(calls) or not set(_KEYS + ["forced_completion_tokens"]) <= set(calls.columns):
        return []
    recorded = calls.dropna(subset=_KEYS)[_KEYS + ["forced_completion_tokens"]]
    joined = recorded.merge(plan[_KEYS + ["forced_completion_tokens"]], on=_KEYS, how="inner", suffixes=("", "_plan"))
    differ = joined[joined["forced_completion_tokens"] != joined["forced_completion_tokens_plan"]]
    if not len(differ):
        return []
    first = differ.iloc[0]
    return [f"{len(differ)} of {len(joined)} call(s) have forced lengths other than workload "
            f"{workload!r}'s plan (first: {row_label(first)}: {int(first['forced_completion_tokens'])} "
            f"tokens, the plan offers {int(first['forced_completion_tokens_plan'])})"]
