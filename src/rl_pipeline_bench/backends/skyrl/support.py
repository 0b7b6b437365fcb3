"""SkyRL's answer to "can the installed release express the contract?" (see backends/framework/support.py).

The checks give the contract's settings (`build_skyrl_config`) to the installed
SkyRL's own config builder, validator, phase gauge and metric functions; no GPU,
vLLM, Megatron or Ray cluster is needed. Entry point:
`python -m rl_pipeline_bench.backends.skyrl.support [--report] NATIVE_CONFIG_JSON`.
"""

from __future__ import annotations

import copy
import sys
from typing import Any, Callable

from ..framework.support import run_checks, support_main
from . import BACKEND

#: Contract point -> the native setting that expresses it (named in every refusal).
CONTRACT_SETTINGS = {
    "config": "SkyRLTrainConfig built from the contract's settings (fully async, Megatron TP1 CP1 EP2, "
              "2 vLLM engines) and accepted by validate_cfg",
    "per_expert_lora": "trainer.policy.model.lora.share_expert_adapters=false with megatron lora_type='lora'",
    "adapter_publication": "trainer.policy.megatron_config.lora_config.merge_lora=false (adapter-only weight sync)",
    "mean_staleness_limit": "trainer.fully_async.max_staleness_steps=4 with B <= workers <= B*(staleness+1)",
    "phase_timing": "TrainingPhaseGauge.timed_phase around the run_training and sync_weights phases",
    "rollout_metrics": "get_rollout_metrics reporting generate/avg_assistant_tokens over loss masks",
}


#: Native keys each setting check owns; the other checks build the config without them, so
#: one unknown key (SkyRL's builder refuses the whole config) is reported against its own setting.
OWNED = {
    "per_expert_lora": ("trainer.policy.model.lora.share_expert_adapters",
                        "trainer.policy.megatron_config.lora_config.experts_shared_outer_loras",
                        "trainer.policy.megatron_config.lora_config.normalize_moe_lora"),
    "adapter_publication": ("trainer.policy.megatron_config.lora_config.merge_lora",),
    "mean_staleness_limit": ("trainer.fully_async.max_staleness_steps",
                             "trainer.fully_async.num_parallel_generation_workers"),
}


def _without(native: dict[str, Any], paths) -> dict[str, Any]:
    out = copy.deepcopy(native)
    for path in paths:
        *parents, leaf = path.split(".")
        node = out
        for key in parents:
            node = node.get(key, {})
        node.pop(leaf, None)
    return out


def _config(native: dict[str, Any], point: str | None = None):
    """SkyRL's own typed config; for `point`, without the keys the other setting checks own."""
    from omegaconf import OmegaConf
    from skyrl.train.config import SkyRLTrainConfig

    if point is not None:
        native = _without(native, [p for other, paths in OWNED.items() if other != point for p in paths])
    return SkyRLTrainConfig.from_dict_config(OmegaConf.create(native))


def _check_config(native, facts):
    from skyrl.train.utils import validate_cfg

    from ..framework.native_types import check_dataclass_types

    cfg = _config(native)
    problems = check_dataclass_types(cfg)
    validate_cfg(cfg)
    return "; ".join(problems) or None


def _check_per_expert_lora(native, facts):
    cfg = _config(native, "per_expert_lora")
    lora = cfg.trainer.policy.model.lora
    mlora = cfg.trainer.policy.megatron_config.lora_config
    facts["per_expert_lora"] = {"share_expert_adapters": lora.share_expert_adapters, "lora_type": mlora.lora_type,
                                "experts_shared_outer_loras": mlora.experts_shared_outer_loras,
                                "normalize_moe_lora": mlora.normalize_moe_lora}
    if lora.share_expert_adapters or mlora.lora_type != "lora" or mlora.experts_shared_outer_loras:
        return f"SkyRL kept {facts['per_expert_lora']}"
    return None


def _check_adapter_publication(native, facts):
    mlora = _config(native, "adapter_publication").trainer.policy.megatron_config.lora_config
    want = native["trainer"]["policy"]["megatron_config"]["lora_config"]["merge_lora"]
    facts["adapter_publication"] = {"merge_lora": mlora.merge_lora}
    return None if mlora.merge_lora == want else f"SkyRL kept merge_lora={mlora.merge_lora}"


def _check_mean_staleness_limit(native, facts):
    fa = _config(native, "mean_staleness_limit").trainer.fully_async
    facts["mean_staleness_limit"] = {"enabled": fa.enabled, "max_staleness_steps": fa.max_staleness_steps,
                                     "num_parallel_generation_workers": fa.num_parallel_generation_workers}
    want = native["trainer"]["fully_async"]
    if not fa.enabled or fa.max_staleness_steps != want["max_staleness_steps"]:
        return f"SkyRL kept fully_async {facts['mean_staleness_limit']}"
    return None


def _check_phase_timing(native, facts):
    from skyrl.train.utils.metrics import PHASES, TrainingPhaseGauge

    from .metrics import COMPLETION_PHASES, TRAINING_PHASE

    missing = [p for p in (TRAINING_PHASE, *COMPLETION_PHASES) if p not in PHASES]
    if not callable(getattr(TrainingPhaseGauge, "timed_phase", None)):
        return "TrainingPhaseGauge has no timed_phase"
    return f"SkyRL's step phases {list(PHASES)} lack {', '.join(missing)}" if missing else None


def _check_rollout_metrics(native, facts):
    from skyrl.train.generators.utils import get_rollout_metrics

    from .metrics import KEYS

    got = get_rollout_metrics([[1, 2, 3], [4, 5]], [0.0, 1.0], loss_masks=[[1, 1, 0], [1, 1]])
    value = got.get(KEYS["avg_tokens"])
    return None if value == 2.0 else f"get_rollout_metrics gave {KEYS['avg_tokens']}={value!r} for masks of 2 and 2 tokens"


CHECKS: dict[str, Callable[[dict, dict], str | None]] = {
    "config": _check_config,
    "per_expert_lora": _check_per_expert_lora,
    "adapter_publication": _check_adapter_publication,
    "mean_staleness_limit": _check_mean_staleness_limit,
    "phase_timing": _check_phase_timing,
    "rollout_metrics": _check_rollout_metrics,
}


def check_support(native: dict[str, Any]) -> dict[str, Any]:
    """{framework, version, gaps: {point: 'setting: why'}, facts}: what the installed framework did with each setting."""
    return run_checks(BACKEND.framework, CHECKS, CONTRACT_SETTINGS, native)


if __name__ == "__main__":
    sys.exit(support_main(check_support, __spec__.name))
