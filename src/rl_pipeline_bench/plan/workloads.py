"""Workload generators: the offered work plan that every backend is given.

A workload is data in config.yaml (group shape plus piecewise-linear quantile knots
for each length). The plan has one row per NEW model call and is a pure function of
(spec, seed, n_updates): every random draw comes from a generator seeded by
`call_seed(workload, seed, update, group, trajectory, call)`, so any backend, host
or process that asks gets the same plan, and no backend argument exists.

Seeding rules (version tag `SEED_DOMAIN`, the ledger's "workload" entry):
- group-shared values (prompt, tool schema, historical turns) are drawn, in that
  order, from the generator of `call_seed(..., trajectory=GROUP_SHARED, call=GROUP_SHARED)`;
- per-call values (forced completion, tool observation, salt) are drawn, in that
  order, from the generator of `call_seed(..., trajectory, call)`.
Because the uniform draws do not depend on the scale, a scaled plan keeps the same
quantile positions as the full-scale plan; only the knots shrink.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..records.configfile import ConfigError, check_member
from ..records.atomicfile import atomic_write_table
from ..records.formats import schema_of

#: Sentinel used for `trajectory` and `call` in `call_seed` for values shared by a whole group.
GROUP_SHARED = -1

#: Version tag mixed into every seed; change it only together with a plan format change.
SEED_DOMAIN = schema_of("workload")

#: Number of random bytes in a per-call salt (rendered as hex text in the plan).
SALT_BYTES = 8

#: Plan columns in order, with their pandas dtypes ("list" = Python list of int).
PLAN_COLUMNS: dict[str, str] = {
    "workload": "str",
    "update": "int64",
    "group": "int64",
    "trajectory": "int64",
    "call": "int64",
    "prompt_tokens": "int64",
    "tool_schema_tokens": "int64",
    "history_completion_tokens": "list",
    "history_observation_tokens": "list",
    "forced_completion_tokens": "int64",
    "tool_observation_tokens": "int64",
    "salt": "str",
}

_ARROW_SCHEMA = pa.schema(
    [
        (name, pa.string() if kind == "str" else pa.list_(pa.int64()) if kind == "list" else pa.int64())
        for name, kind in PLAN_COLUMNS.items()
    ]
)
_META_KEY = b"rl-bench/plan"

Knots = tuple[tuple[float, int], ...]
_DISTRIBUTIONS = ("prompt_tokens", "completion_tokens", "tool_observation_tokens", "tool_schema_tokens")


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload at one scale: group shape and scaled length distributions."""

    name: str
    description: str
    scale: float
    group_size: int
    groups_per_update: int
    historical_turns: int
    new_calls: int
    salt: str  # "none" | "per_call"
    prompt_tokens: Knots
    completion_tokens: Knots
    tool_observation_tokens: Knots
    tool_schema_tokens: Knots

    @property
    def trajectories_per_update(self) -> int:
        """Offered trajectories per update (the contract's offered_trajectories_per_update)."""
        return self.group_size * self.groups_per_update

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in _DISTRIBUTIONS:
            d[k] = [list(p) for p in d[k]]
        return d


def _scaled(value: float, scale: float) -> int:
    """Scale a length or count; zero stays zero, anything positive stays >= 1."""
    if value == 0:
        return 0
    return max(1, math.floor(value * scale + 0.5))


def load_workload(config: dict[str, Any], name: str, scale: float = 1.0) -> WorkloadSpec:
    """Build the WorkloadSpec of config['workloads'][name] with lengths and groups_per_update scaled."""
    workloads = config.get("workloads") or {}
    check_member("workload", name, list(workloads))
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not scale > 0 or not math.isfinite(scale):
        raise ConfigError(f"workload scale must be a positive number (got {scale!r})")
    w = workloads[name]
    knots = {}
    for dist in _DISTRIBUTIONS:
        if dist not in w:
            raise ConfigError(f"config key 'workloads/{name}/{dist}' is missing")
        knots[dist] = tuple((float(p), _scaled(v, scale)) for p, v in w[dist])
    return WorkloadSpec(
        name=name,
        description=str(w.get("description", "")),
        scale=float(scale),
        group_size=int(w["group_size"]),
        groups_per_update=_scaled(w["groups_per_update"], scale),
        historical_turns=int(w["historical_turns"]),
        new_calls=int(w["new_calls"]),
        salt=str(w["salt"]),
        **knots,
    )


def quantile_sample(knots, u):
    """Inverse CDF through [probability, tokens] knots (piecewise linear), rounded to int.

    `u` may be a float in [0, 1] (returns int) or an array (returns an int64 array).
    """
    ps = np.asarray([k[0] for k in knots], dtype=float)
    vs = np.asarray([k[1] for k in knots], dtype=float)
    if len(ps) < 2 or ps[0] != 0.0 or ps[-1] != 1.0 or np.any(np.diff(ps) <= 0):
        raise ValueError(f"knots must have strictly increasing probabilities from 0 to 1, got {list(knots)}")
    arr = np.asarray(u, dtype=float)
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"quantile position must lie in [0, 1], got {u!r}")
    out = np.floor(np.interp(arr, ps, vs) + 0.5).astype(np.int64)
    return int(out) if out.ndim == 0 else out


def call_seed(workload: str, seed: int, update: int, group: int, trajectory: int, call: int) -> int:
    """64-bit seed as a pure function of the call's identity (sha256; never Python's hash()).

    Use trajectory=call=GROUP_SHARED (-1) for values shared by the whole group.
    """
    key = json.dumps([SEED_DOMAIN, str(workload), int(seed), int(update), int(group), int(trajectory), int(call)])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _rng(*identity) -> np.random.Generator:
    return np.random.default_rng(call_seed(*identity))


def offered_plan(spec: WorkloadSpec, seed: int, n_updates: int) -> pd.DataFrame:
    """The offered plan for updates 1..n_updates: one row per new model call (see PLAN_COLUMNS)."""
    if int(n_updates) < 1:
        raise ValueError(f"n_updates must be at least 1 (got {n_updates})")
    H = spec.historical_turns
    rows: list[dict[str, Any]] = []
    for update in range(1, int(n_updates) + 1):
        for group in range(spec.groups_per_update):
            g = _rng(spec.name, seed, update, group, GROUP_SHARED, GROUP_SHARED)
            prompt = quantile_sample(spec.prompt_tokens, g.random())
            schema = quantile_sample(spec.tool_schema_tokens, g.random())
            hist_c = [int(x) for x in quantile_sample(spec.completion_tokens, g.random(H))]
            hist_o = [int(x) for x in quantile_sample(spec.tool_observation_tokens, g.random(H))]
            for trajectory in range(spec.group_size):
                for call in range(spec.new_calls):
                    r = _rng(spec.name, seed, update, group, trajectory, call)
                    completion = quantile_sample(spec.completion_tokens, r.random())
                    observation = quantile_sample(spec.tool_observation_tokens, r.random())
                    salt = r.bytes(SALT_BYTES).hex() if spec.salt == "per_call" else ""
                    rows.append({
                        "workload": spec.name, "update": update, "group": group,
                        "trajectory": trajectory, "call": call,
                        "prompt_tokens": prompt, "tool_schema_tokens": schema,
                        "history_completion_tokens": list(hist_c),
                        "history_observation_tokens": list(hist_o),
                        "forced_completion_tokens": completion,
                        # the last call of a trajectory gets no observation after it
                        "tool_observation_tokens": observation if call < spec.new_calls - 1 else 0,
                        "salt": salt,
                    })
    df = normalize_plan(pd.DataFrame(rows, columns=list(PLAN_COLUMNS)))
    if spec.salt == "per_call" and df["salt"].nunique() != len(df):
        raise RuntimeError(f"salt collision in the {spec.name} plan (seed {seed}); salts must be unique per call")
    return df


def normalize_plan(df: pd.DataFrame) -> pd.DataFrame:
    """Put a plan into its one canonical form: column order, dtypes, Python-list history columns."""
    missing = [c for c in PLAN_COLUMNS if c not in df.columns]
    extra = [c for c in df.columns if c not in PLAN_COLUMNS]
    if missing or extra:
        raise ValueError(f"not an offered plan: missing columns {missing}, unexpected columns {extra}")
    out = {}
    for name, kind in PLAN_COLUMNS.items():
        col = df[name]
        if kind == "list":
            out[name] = pd.Series([[int(x) for x in v] for v in col], dtype=object)
        elif kind == "str":
            out[name] = pd.Series([str(v) for v in col]).astype(str)
        else:
            out[name] = pd.Series(col.to_numpy(), dtype=kind)
    out_df = pd.DataFrame(out)
    return out_df.sort_values(["update", "group", "trajectory", "call"], kind="stable").reset_index(drop=True)


def write_plan(df: pd.DataFrame, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> Path:
    """Write a plan as parquet atomically (same-folder temp file, fsync, os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    df = normalize_plan(df)
    table = pa.Table.from_pandas(df, schema=_ARROW_SCHEMA, preserve_index=False)
    table = table.replace_schema_metadata({_META_KEY: json.dumps(meta or {}, sort_keys=True).encode()})
    atomic_write_table(path, table)
    return path


def read_plan(path: str | os.PathLike) -> pd.DataFrame:
    """Read a plan written by write_plan, in the same canonical form offered_plan returns."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"offered plan not found: {path}")
    return normalize_plan(pq.read_table(path).to_pandas())


def read_plan_meta(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata stored with a plan (workload spec, seed, n_updates, suite), or {}."""
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(_META_KEY)
    return json.loads(raw) if raw else {}


def workload_of(spec, workload: str) -> WorkloadSpec:
    """The WorkloadSpec a run spec resolves for one of its workloads (its distribution at its scale)."""
    settings = spec.settings
    check_member("workload", workload, spec.workloads)
    return load_workload({"workloads": settings["workload_distributions"]}, workload,
                         float(settings["workload_scale"][workload]))


def spec_plan(spec, workload: str) -> tuple[WorkloadSpec, pd.DataFrame, dict[str, Any]]:
    """The plan a run spec offers for one workload (rl_pipeline_bench.settings.spec.RunSpec).

    It covers the N trained updates plus the spec's extra offered updates, so the
    rollout has work through the headline window. Returns (spec, plan, meta); meta is
    what write_plan stores alongside (spec id and hash among it).
    """
    ws = workload_of(spec, workload)
    plan = offered_plan(ws, spec.seed, spec.offered_updates)
    meta = {
        "suite": spec.suite_name, "spec_id": spec.id, "spec_hash": spec.hash, "seed": spec.seed,
        "n_updates": spec.offered_updates, "trained_updates": spec.trained_updates,
        "extra_offered_updates": spec.extra_offered_updates, "spec": ws.to_dict(),
    }
    return ws, plan, meta


def iter_trajectories(plan: pd.DataFrame) -> Iterator[tuple[tuple[int, int, int], pd.DataFrame]]:
    """Yield ((update, group, trajectory), rows ordered by call) for every trajectory of a plan."""
    for key, rows in plan.groupby(["update", "group", "trajectory"], sort=True):
        yield tuple(int(k) for k in key), rows.sort_values("call").reset_index(drop=True)
