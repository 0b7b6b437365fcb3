"""File targets of the eval stage, computed from the config at DAG time (used by rules/eval.smk).

Spec, runs and summaries live under `results/eval/{eval_suite}-{settings hash}/`
(rl_pipeline_bench.paths: EVAL_*); each run's `eval.json` points at its evidence under
`results/eval_evidence/`.
"""

from __future__ import annotations

from pathlib import Path

from .. import paths
from ..records.configfile import ConfigError
from . import spec as eval_spec
from .policies.loader import BUILTIN, checkpoint_id, configured_checkpoints


def resolved(config: dict, name: str) -> dict:
    return eval_spec.resolve(config, name)


def spec_path(config: dict, name: str) -> str:
    s = resolved(config, name)
    return paths.EVAL_SPEC_FILE.format(esuite=s["eval_suite"], ehash=s["hash"])


def policies(config: dict, name: str) -> list[str]:
    """Policy ids to evaluate in a suite: its built-ins, then every configured checkpoint."""
    s = resolved(config, name)
    ids = [p for p in s["policies"] if p in BUILTIN]
    ids.extend(checkpoint_id(p) for p in configured_checkpoints(config))
    return ids


def checkpoint_path(config: dict, policy_id: str) -> str | None:
    for p in configured_checkpoints(config):
        if checkpoint_id(p) == policy_id:
            return str(Path(p).expanduser().resolve())
    if policy_id in BUILTIN:
        return None
    raise ConfigError(f"policy '{policy_id}' is neither built-in ({', '.join(BUILTIN)}) nor a configured checkpoint "
                      "(eval_checkpoint / eval_checkpoints_dir)")


def run_pointers(config: dict, name: str, policy_id: str) -> list[str]:
    s = resolved(config, name)
    return [paths.EVAL_RUN_RECORD.format(esuite=s["eval_suite"], ehash=s["hash"], policy=policy_id, run=r)
            for r in range(1, s["runs"] + 1)]


def summary_path(config: dict, name: str, policy_id: str) -> str:
    s = resolved(config, name)
    return paths.EVAL_SUMMARY.format(esuite=s["eval_suite"], ehash=s["hash"], policy=policy_id)


def check_user_inputs(config: dict, name: str) -> None:
    """At DAG time, before any job: the checkpoint paths and assets the user named must be there."""
    from .envs import EnvUnavailable
    from .envs.libero_env import check_assets
    from .policies.loader import check_checkpoint

    if config.get("eval_checkpoint"):
        check_checkpoint(config["eval_checkpoint"])
    bench = resolved(config, name)["benchmark"]
    try:
        if bench == "libero":
            check_assets(config.get("libero_assets"))
        elif bench == "robotwin":
            from .envs.robotwin_env import preflight

            preflight(resolved(config, name), config)
    except EnvUnavailable as exc:
        raise ConfigError(str(exc)) from None


def summaries(config: dict, name: str | None, require: bool = True) -> list[str]:
    """Every summary of an eval suite; a suite with nothing to evaluate is an error naming the fix."""
    if not name:
        return []
    check_user_inputs(config, name)
    ids = policies(config, name)
    if not ids and require:
        raise ConfigError(f"eval suite '{name}' has no policy to evaluate: pass --config eval_checkpoint=PATH or "
                          "eval_checkpoints_dir=DIR (docs/evaluation.md)")
    return [summary_path(config, name, p) for p in ids]
