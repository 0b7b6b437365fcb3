"""GPU inventory: what NVML says about the host's devices, in one plain structure.

The lease supervisor and `bench gpus` both need the same facts (index, UUID, name,
memory, compute processes, driver). They come from NVML through `nvidia-ml-py`.
For tests only, the JSON file named by RL_BENCH_GPU_INVENTORY stands in for NVML;
it is the single test seam, and every lease taken through it says so in its record.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from ..records.jsonfile import read_json

#: Environment variable naming a JSON inventory file that replaces NVML (tests only).
INVENTORY_ENV = "RL_BENCH_GPU_INVENTORY"

_MIB = 1024 * 1024


class InventoryError(RuntimeError):
    """The GPU inventory cannot be read (no NVML, or a malformed inventory file)."""


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_memory_mib: int | None  # None when NVML cannot attribute memory (e.g. some containers)


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    memory_total_mib: int
    memory_used_mib: int
    processes: tuple[GpuProcess, ...]
    driver: str

    def describe(self) -> str:
        return f"GPU {self.index} ({self.uuid})"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["processes"] = [asdict(p) for p in self.processes]
        return d


@dataclass(frozen=True)
class Inventory:
    gpus: tuple[Gpu, ...]
    source: str  # "nvml" or "inventory file PATH (test seam)"
    driver: str
    notes: tuple[str, ...] = field(default=())

    def by_index(self) -> dict[int, Gpu]:
        return {g.index: g for g in self.gpus}

    def by_uuid(self) -> dict[str, Gpu]:
        return {g.uuid: g for g in self.gpus}


def query_inventory(env: dict[str, str] | None = None) -> Inventory:
    """Read the inventory file if RL_BENCH_GPU_INVENTORY is set, else ask NVML."""
    env = os.environ if env is None else env
    path = env.get(INVENTORY_ENV)
    if path:
        return _from_file(Path(path))
    return _from_nvml()


# --------------------------------------------------------------------------- file


def _need(entry: dict, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in entry:
        raise InventoryError(f"{where}: missing '{key}'")
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InventoryError(f"{where}: '{key}' must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _from_file(path: Path) -> Inventory:
    where = f"inventory file {path} ({INVENTORY_ENV}, test seam)"
    data = read_json(path, f"inventory file ({INVENTORY_ENV}, test seam)", InventoryError)
    if not isinstance(data, list):
        raise InventoryError(f"{where}: expected a JSON list of devices, got {type(data).__name__}")
    gpus: list[Gpu] = []
    for i, entry in enumerate(data):
        at = f"{where}: entry {i}"
        if not isinstance(entry, dict):
            raise InventoryError(f"{at}: expected an object")
        procs = []
        for j, p in enumerate(_need(entry, "processes", list, at)):
            pat = f"{at}: processes[{j}]"
            if not isinstance(p, dict):
                raise InventoryError(f"{pat}: expected an object")
            mem = p.get("used_memory_mib")
            if mem is not None and (isinstance(mem, bool) or not isinstance(mem, int)):
                raise InventoryError(f"{pat}: 'used_memory_mib' must be an integer or null")
            procs.append(GpuProcess(pid=_need(p, "pid", int, pat), used_memory_mib=mem))
        gpus.append(
            Gpu(
                index=_need(entry, "index", int, at),
                uuid=_need(entry, "uuid", str, at),
                name=_need(entry, "name", str, at),
                memory_total_mib=_need(entry, "memory_total_mib", int, at),
                memory_used_mib=_need(entry, "memory_used_mib", int, at),
                processes=tuple(procs),
                driver=_need(entry, "driver", str, at),
            )
        )
    _check_unique(gpus, where)
    drivers = sorted({g.driver for g in gpus})
    return Inventory(gpus=tuple(gpus), source=f"inventory file {path} (test seam)", driver=",".join(drivers))


def _check_unique(gpus: list[Gpu], where: str) -> None:
    for attr in ("index", "uuid"):
        seen: set = set()
        for g in gpus:
            value = getattr(g, attr)
            if value in seen:
                raise InventoryError(f"{where}: duplicate {attr} {value!r}")
            seen.add(value)


# --------------------------------------------------------------------------- NVML


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mib(nbytes: int | None) -> int | None:
    # NVML reports "not available" as the all-ones 64-bit value; pynvml maps some of those to None.
    if nbytes is None or nbytes >= 2**63:
        return None
    return int(nbytes) // _MIB


#: What an NVML start-up error means on this host, by the name of NVML's error code in pynvml.
_NVML_MEANING = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": (" (no NVIDIA driver here: libnvidia-ml.so comes with the driver, so this machine shows no GPUs; "
         "CPU suites such as smoke need none, GPU suites and `bench lease` need the driver)"),
    "NVML_ERROR_DRIVER_NOT_LOADED": " (the NVIDIA kernel driver is not loaded: `nvidia-smi` says why; no GPU can be listed or leased)",
}


def _from_nvml() -> Inventory:
    try:
        import pynvml
    except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a declared dependency
        raise InventoryError(f"NVML unavailable: cannot import pynvml (nvidia-ml-py): {exc}") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        meaning = next((m for name, m in _NVML_MEANING.items() if getattr(exc, "value", None) == getattr(pynvml, name)), "")
        raise InventoryError(f"NVML unavailable: {exc}{meaning}") from None
    notes: list[str] = []
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            try:  # v2 excludes driver-reserved memory, as current nvidia-smi does
                mem = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            except (pynvml.NVMLError, AttributeError, TypeError):
                mem = pynvml.nvmlDeviceGetMemoryInfo(h)
                notes.append(f"GPU {i}: memory from nvmlDeviceGetMemoryInfo v1 (includes reserved memory)")
            procs = {}
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetMPSComputeRunningProcesses"):
                try:
                    found = getattr(pynvml, getter)(h)
                except pynvml.NVMLError_NotSupported:
                    if getter.startswith("nvmlDeviceGetMPS"):
                        continue
                    raise
                for p in found:
                    procs.setdefault(int(p.pid), GpuProcess(pid=int(p.pid), used_memory_mib=_mib(p.usedGpuMemory)))
            gpus.append(
                Gpu(
                    index=int(pynvml.nvmlDeviceGetIndex(h)),
                    uuid=_text(pynvml.nvmlDeviceGetUUID(h)),
                    name=_text(pynvml.nvmlDeviceGetName(h)),
                    memory_total_mib=int(mem.total) // _MIB,
                    memory_used_mib=int(mem.used) // _MIB,
                    processes=tuple(procs.values()),
                    driver=driver,
                )
            )
    except pynvml.NVMLError as exc:
        raise InventoryError(f"NVML query failed: {exc}") from None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
    return Inventory(gpus=tuple(gpus), source="nvml", driver=driver, notes=tuple(notes))
