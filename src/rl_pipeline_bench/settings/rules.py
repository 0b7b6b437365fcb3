"""The cross-field rules of a suite's settings, each stated once.

The config (settings.config.validate_config) and a spec file's settings
(settings.spec_schema.settings_problems) hold the same values under other keys, so
each rule here returns what is wrong without naming the key; the caller names it
("config key 'suites/x/gpus'" or "spec key 'settings/gpus'"). docs/architecture.md
lists which layer checks what.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..contract.settings import ContractSettings


def contract_problem(contract: Mapping[str, Any] | None) -> str | None:
    """The contract settings as ContractSettings reads them (integers >= 1, headline <= measured)."""
    try:
        ContractSettings.with_defaults(contract)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def device_gpus_problem(device: str, gpus: int) -> str | None:
    """A cpu suite leases no GPU; a cuda suite leases at least one."""
    if device == "cpu" and gpus != 0:
        return f"a cpu suite takes no GPUs (got {gpus})"
    if device == "cuda" and gpus < 1:
        return "a cuda suite needs at least one GPU"
    return None


def model_source_problem(model: Mapping[str, Any]) -> tuple[str, str] | None:
    """(the key below the model, what is wrong): a hub model pins a revision, a local model names its build config."""
    if model.get("source") == "hub" and "revision" not in model:
        return "revision", "a hub model must pin a 40-hex revision"
    if model.get("source") == "local" and "build_config" not in model:
        return "build_config", "a local model needs its build config"
    return None
