"""GPU sets (the lease command's SPEC): host physical indices or exact UUIDs, resolved against the inventory.

A SPEC never falls back to other devices: every entry must name one device of this
host, no device twice, and exactly as many distinct devices as the suite needs.
"""

from __future__ import annotations

from ..host.gpus import Gpu, Inventory


class GpuSetError(ValueError):
    """A malformed or unresolvable SPEC; `gpu` is the offending entry."""

    def __init__(self, gpu: str, reason: str):
        super().__init__(f"{gpu}: {reason}")
        self.gpu = gpu
        self.reason = reason


def parse_gpu_set(spec: str) -> list[str]:
    """Split 'a,b,c' into stripped entries; empty entries are errors, not skipped."""
    if not isinstance(spec, str) or not spec.strip():
        raise GpuSetError(f"SPEC {spec!r}", "empty GPU SPEC (give host indices like '0,1' or exact UUIDs)")
    entries = [e.strip() for e in spec.split(",")]
    for pos, e in enumerate(entries):
        if not e:
            raise GpuSetError(f"SPEC {spec!r}", f"entry {pos + 1} is empty")
    return entries


def _known(inventory: Inventory) -> str:
    if not inventory.gpus:
        return "this host has no GPUs"
    return "host GPUs: " + ", ".join(f"{g.index}={g.uuid}" for g in inventory.gpus)


def resolve_gpu_set(spec: str, count: int, inventory: Inventory) -> list[Gpu]:
    """Resolve SPEC to exactly `count` distinct devices, in the order given."""
    if count < 1:
        raise GpuSetError(f"SPEC {spec!r}", f"required device count must be at least 1 (got {count})")
    by_index, by_uuid = inventory.by_index(), inventory.by_uuid()
    chosen: list[Gpu] = []
    for entry in parse_gpu_set(spec):
        if entry.isdigit():
            gpu = by_index.get(int(entry))
            if gpu is None:
                raise GpuSetError(f"GPU {entry}", f"index out of range in SPEC {spec!r} ({_known(inventory)})")
        elif entry.lstrip("-+").isdigit():
            raise GpuSetError(f"GPU {entry}", f"not a valid host index in SPEC {spec!r}")
        else:
            gpu = by_uuid.get(entry)
            if gpu is None:
                raise GpuSetError(f"GPU {entry}", f"unknown UUID in SPEC {spec!r}; UUIDs must match exactly ({_known(inventory)})")
        if any(g.uuid == gpu.uuid for g in chosen):
            raise GpuSetError(gpu.describe(), f"listed more than once in SPEC {spec!r}")
        chosen.append(gpu)
    if len(chosen) != count:
        kind = "too few" if len(chosen) < count else "too many"
        raise GpuSetError(
            f"SPEC {spec!r}",
            f"{kind} devices: names {len(chosen)} distinct GPU(s), exactly {count} required",
        )
    return chosen
