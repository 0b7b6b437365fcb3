"""A run's evidence checked against the run spec and the offered plan its manifest names.

The manifest says which spec (id, hash) and workload a run belongs to, but a label is
only a label: evidence relabelled from one workload to another (or another backend,
trial or suite) would summarise as valid. The spec fixes the suite, its backends,
workloads and trials, and the plan of each workload is a pure function of the spec
(`workloads.spec_plan`), so every recorded call's forced completion length must be the
plan's for that (update, group, trajectory, call). A mismatch is the reason
`plan_mismatch` (docs/validation.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..plan.call_identity import CALL_KEYS, row_label

CODE = "plan_mismatch"  # described in contract/reasons.py with every other code
_KEYS = list(CALL_KEYS)


def _named_spec(manifest: Mapping[str, Any], evidence_dir: Path):
    """The spec the manifest names: results/specs/{id}.json beside the evidence root, else its recorded path."""
    from ..settings.spec import load_spec

    named = manifest.get("spec")
    if not isinstance(named, dict) or not isinstance(named.get("id"), str) or "/" in named["id"]:
        return None
    candidates = [Path(evidence_dir).resolve().parent.parent / "specs" / f"{named['id']}.json"]
    if isinstance(named.get("path"), str):
        candidates.append(Path(named["path"]))
    for path in candidates:
        if path.is_file():
            spec = load_spec(path)
            return spec if spec.hash == named.get("hash") else None
    return None


def check_plan_identity(manifest: Mapping[str, Any] | None, calls: pd.DataFrame, evidence_dir: Path,
                        reasons: list[str]) -> None:
    """Append `plan_mismatch` when the evidence is not a run of the spec and workload its manifest names.

    Evidence whose manifest names no spec file that can be found is not checked here
    (`bench summarize-run --spec` requires the spec; a missing spec is its finding).
    """
    if not isinstance(manifest, Mapping):
        return
    try:
        spec = _named_spec(manifest, evidence_dir)
    except Exception as exc:  # an unreadable or invalid spec file: named, never a crash of the summary
        reasons.append(f"{CODE}: the spec the manifest names cannot be read ({exc})")
        return
    if spec is None:
        return
    s = spec.settings
    problems = []
    for key, allowed in (("suite", [s["suite"]]), ("backend", s["backends"]), ("workload", s["workloads"])):
        if manifest.get(key) not in allowed:
            problems.append(f"{key} {manifest.get(key)!r} is not one of spec {spec.id}'s {allowed}")
    trial = manifest.get("trial")
    # trials are not part of a spec's identity (docs/run-spec.md): any trial >= 1 is a run of the spec
    if not isinstance(trial, int) or isinstance(trial, bool) or trial < 1:
        problems.append(f"trial {trial!r} is not a trial number (1, 2, ...)")
    if not problems and len(calls) and set(_KEYS + ["forced_completion_tokens"]) <= set(calls.columns):
        from ..plan.workloads import spec_plan

        _ws, plan, _meta = spec_plan(spec, manifest["workload"])
        recorded = calls.dropna(subset=_KEYS)[_KEYS + ["forced_completion_tokens"]]
        joined = recorded.merge(plan[_KEYS + ["forced_completion_tokens"]], on=_KEYS, how="inner",
                                suffixes=("", "_plan"))
        differ = joined[joined["forced_completion_tokens"] != joined["forced_completion_tokens_plan"]]
        if len(differ):
            first = differ.iloc[0]
            problems.append(
                f"{len(differ)} of {len(joined)} call(s) have forced lengths other than workload "
                f"{manifest['workload']!r}'s plan (first: {row_label(first)}: {int(first['forced_completion_tokens'])} "
                f"tokens, the plan offers {int(first['forced_completion_tokens_plan'])})")
    if problems:
        reasons.append(f"{CODE}: " + "; ".join(problems))
