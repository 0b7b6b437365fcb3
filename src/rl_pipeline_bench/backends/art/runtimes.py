"""Where ART's vLLM and Megatron-Core live: runtime environments of their own.

ART 0.5.23 starts vLLM from its vLLM runtime's venv (`art/vllm_runtime.py`:
`ART_VLLM_RUNTIME_BIN`, else `get_vllm_runtime_project_root()/.venv`) and its Megatron
trainer from the `megatron_runtime` project's venv (`art/megatron/runtime/managed.py`:
`ART_MEGATRON_RUNTIME_PYTHON`, else `<checkout>/megatron_runtime/.venv/bin/python`), the
two venvs containers/art/setup.sh builds. A manifest reads their versions there
(hostinfo.home_versions), not from the controller's venv, which holds neither.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def _checkout_root() -> Path | None:
    """The ART source checkout the installed `art` package comes from (src/art/__init__.py)."""
    spec = importlib.util.find_spec("art")
    return Path(spec.origin).resolve().parents[2] if spec and spec.origin else None


def vllm_python() -> str | None:
    if override := os.environ.get("ART_VLLM_RUNTIME_BIN"):
        # ART takes the runtime folder from `<dir>/.venv/bin/art-vllm-runtime-server`.
        return str(Path(override.split()[0]).expanduser().resolve().parent / "python")
    try:
        from art.vllm_runtime import get_vllm_runtime_project_root
    except ImportError:
        return None
    return str(get_vllm_runtime_project_root() / ".venv" / "bin" / "python")


def megatron_python() -> str | None:
    if override := os.environ.get("ART_MEGATRON_RUNTIME_PYTHON"):
        return str(Path(override).expanduser().resolve())
    root = _checkout_root()
    return str(root / "megatron_runtime" / ".venv" / "bin" / "python") if root else None


def package_homes() -> dict[str, str | None]:
    """{distribution: interpreter of the venv it lives in} for the backend descriptor."""
    return {"vllm": vllm_python(), "megatron-core": megatron_python()}
