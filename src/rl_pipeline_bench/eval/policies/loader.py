"""Load a policy by reference: built-in baselines, or a checkpoint directory given by path.

A checkpoint directory either carries `policy.json` naming a built-in kind and its
parameters (the scripted baseline can be saved this way), or is handed to a user's
entry point (`--config eval_policy_entry_point=module:function`; the function takes
the checkpoint path and returns a Policy), which is how OpenVLA-OFT weights plug in.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...records.configfile import ConfigError
from .base import Policy, PolicyRef
from .scripted import ScriptedLift, ScriptedPickPlace
from .standin import ZeroAction
from ...records.jsonfile import read_json


@dataclass(frozen=True)
class Builtin:
    """A built-in policy: how to make it, what it is (`role`, shown beside its rows) and where it can act."""

    factory: Callable[..., Policy]
    role: str                      # "scripted" (hand-written from state observations) or "stand-in" (a floor)
    label: str
    benchmarks: tuple[str, ...]


BUILTIN = {
    "scripted_lift": Builtin(ScriptedLift, "scripted", "scripted from state observations (cube and gripper "
                             "positions); not a learned policy", ("robosuite",)),
    "scripted_pick_place": Builtin(ScriptedPickPlace, "scripted", "scripted from state observations (object, basket "
                                   "and gripper positions) for LIBERO-Object's pick-and-place tasks; not a learned "
                                   "policy", ("libero",)),
    "zero_action": Builtin(ZeroAction, "stand-in", "stand-in: an all-zero action every step, no learned policy; "
                           "a floor, not a reproduction of the paper", ("robosuite", "libero")),
}
POLICY_FILE = "policy.json"


class PolicyLoadError(ConfigError):
    """A checkpoint that cannot be loaded; the message names the path and why."""


def checkpoint_id(path: str | Path) -> str:
    """A readable, unique evaluation key: the directory name plus a hash of its resolved path."""
    p = Path(path).expanduser().resolve()
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", p.name) or "checkpoint"
    return f"{name}-{hashlib.sha256(str(p).encode()).hexdigest()[:8]}"


def resolve_ref(policy_id: str, config: dict) -> PolicyRef:
    """The PolicyRef behind an evaluation's policy id (built-in name or checkpoint id)."""
    if policy_id in BUILTIN:
        return PolicyRef(policy_id=policy_id, kind=policy_id)
    for path in configured_checkpoints(config):
        if checkpoint_id(path) == policy_id:
            return PolicyRef(policy_id=policy_id, kind="checkpoint", path=str(Path(path).expanduser().resolve()),
                             entry_point=config.get("eval_policy_entry_point"))
    raise PolicyLoadError(f"unknown policy '{policy_id}': not a built-in ({', '.join(BUILTIN)}) nor a checkpoint "
                          "given by eval_checkpoint / eval_checkpoints_dir")


def configured_checkpoints(config: dict) -> list[Path]:
    from ..schedule import find_checkpoints

    out = []
    if config.get("eval_checkpoint"):
        out.append(Path(config["eval_checkpoint"]).expanduser())
    if config.get("eval_checkpoints_dir"):
        out.extend(find_checkpoints(config["eval_checkpoints_dir"]))
    return out


def check_benchmark(ref: PolicyRef, benchmark: str) -> None:
    """A built-in policy acts only in the benchmarks it was written for; ConfigError naming them."""
    builtin = BUILTIN.get(ref.kind)
    if builtin is not None and benchmark not in builtin.benchmarks:
        raise ConfigError(f"policy '{ref.policy_id}' ({builtin.label}) acts in {', '.join(builtin.benchmarks)}, "
                          f"not {benchmark}")


def check_checkpoint(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise PolicyLoadError(f"policy checkpoint {path}: no such file or directory")
    if not p.is_dir():
        raise PolicyLoadError(f"policy checkpoint {path}: not a directory")
    return p.resolve()


def checkpoint_identity(ref: PolicyRef) -> dict[str, Any]:
    """Path and sha256 over every file (relative path + content) of a checkpoint; built-ins have none."""
    if ref.kind != "checkpoint":
        builtin = BUILTIN[ref.kind]
        return {"kind": ref.kind, "role": builtin.role, "label": builtin.label, "path": None, "sha256": None,
                "files": 0}
    root = check_checkpoint(ref.path)
    digest = hashlib.sha256()
    files = sorted(f for f in root.rglob("*") if f.is_file())
    for f in files:
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest.update(f"{f.relative_to(root).as_posix()}\0{h.hexdigest()}\n".encode())
    return {"kind": "checkpoint", "role": "checkpoint", "label": f"checkpoint {root}", "path": str(root),
            "sha256": digest.hexdigest(), "files": len(files), "entry_point": ref.entry_point}


def load_policy(ref: PolicyRef) -> Policy:
    if ref.kind in BUILTIN:
        return BUILTIN[ref.kind].factory()
    if ref.kind != "checkpoint":
        raise PolicyLoadError(f"unknown policy kind '{ref.kind}' (known: checkpoint, {', '.join(BUILTIN)})")
    root = check_checkpoint(ref.path)
    described = root / POLICY_FILE
    if described.is_file():
        desc = read_json(described, "policy description", PolicyLoadError)
        try:
            kind, params = desc["kind"], dict(desc.get("params") or {})
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyLoadError(f"{described}: not a policy description ({exc})") from None
        if kind not in BUILTIN:
            raise PolicyLoadError(f"{described}: unknown kind '{kind}' (known: {', '.join(BUILTIN)})")
        return BUILTIN[kind].factory(**params)
    if not ref.entry_point:
        raise PolicyLoadError(
            f"policy checkpoint {root} has no {POLICY_FILE}; pass the loader for its weights with "
            "--config eval_policy_entry_point=module:function (docs/evaluation.md: what a user must bring)")
    module, _, func = ref.entry_point.partition(":")
    try:
        factory = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError, ValueError) as exc:
        raise PolicyLoadError(f"eval_policy_entry_point '{ref.entry_point}' cannot be imported: {exc}") from None
    return factory(str(root))
