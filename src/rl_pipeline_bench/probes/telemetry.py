"""GPU telemetry beside a benchmark run: an NVML sampler on exactly the leased devices.

A daemon thread polls, every `interval_s`, each leased GPU (found by UUID, so the
lease's CUDA_VISIBLE_DEVICES renumbering cannot confuse it) for utilisation (GPU and
memory controller), memory used/total, power and SM clock, and also drains NVML's
own utilisation sample buffers (`nvmlDeviceGetSamples`), which hold finer-grained
samples than the poll. Times are seconds on the run's evidence clock.

The samples grow as the run goes like the other evidence tables (evidence_parts): every
`flush_interval_s` the rows since the last flush become one append-only part
(`parts/telemetry-{seq}.arrow`); when the sampler stops it writes the whole
`telemetry.parquet` and removes its parts. A crash keeps the parts, and
`read_telemetry` reads either layout.
Telemetry is never a validity rule: if NVML cannot start, the sampler records why
in the manifest's `telemetry` field and the run goes on without it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

TELEMETRY = "telemetry.parquet"
TELEMETRY_STEM = "telemetry"  # its parts while the run goes: parts/telemetry-{seq}.arrow

TELEMETRY_SCHEMA = pa.schema(
    [
        ("t", pa.float64()),  # seconds on the run's evidence clock
        ("gpu_index", pa.int64()),  # host index from the lease record
        ("gpu_uuid", pa.string()),
        ("source", pa.string()),  # "poll" or "nvml_samples" (NVML's own buffer)
        ("gpu_util_pct", pa.float64()),
        ("mem_util_pct", pa.float64()),
        ("memory_used_mib", pa.float64()),
        ("memory_total_mib", pa.float64()),
        ("power_w", pa.float64()),
        ("sm_clock_mhz", pa.float64()),
    ]
)
SOURCES = ("poll", "nvml_samples")

_MIB = 1024 * 1024
_MAX_ERRORS = 10  # distinct error messages kept in the manifest


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _sample_value(nvml, value_type: int, value) -> float:
    """The number inside an nvmlValue_t union, by the value type NVML returned."""
    field = {
        nvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    }.get(value_type, "uiVal")
    return float(getattr(value, field))


class TelemetrySampler:
    """Samples the given devices into `path` until stopped; never raises into the run.

    `devices` are the lease record's entries ({index, uuid, ...}). `nvml` is the NVML
    binding (the `pynvml` module of nvidia-ml-py); tests without a GPU pass a double.
    """

    def __init__(self, path: Path | str, devices: Sequence[dict[str, Any]], clock: Callable[[], float], *,
                 interval_s: float = 1.0, flush_interval_s: float = 10.0, nvml_samples: bool = True,
                 nvml: Any = None) -> None:
        if interval_s <= 0 or flush_interval_s <= 0:
            raise ValueError("telemetry interval_s and flush_interval_s must be > 0")
        self.path = Path(path)
        self.devices = [{"index": int(d["index"]), "uuid": str(d["uuid"])} for d in devices]
        self.clock = clock
        self.interval_s = float(interval_s)
        self.flush_interval_s = float(flush_interval_s)
        self.use_samples = bool(nvml_samples)
        self._nvml = nvml
        self._handles: list[tuple[dict, Any]] = []
        self._rows: list[dict] = []  # in sampling order; readers sort by t
        self._batches: list[pa.RecordBatch] = []
        self._converted = 0
        self._seq = 0
        self._last_seen: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._errors: list[str] = []
        self._unsupported: set[str] = set()
        self._memory_v2 = True
        self._polls = 0
        self._busy_s = 0.0
        self._flushes = 0
        self._started_at: float | None = None
        self.status: dict[str, Any] = {"status": "not_started"}

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Open NVML and the devices, write an empty telemetry file, start the thread.

        Returns the status record: `running`, or `unavailable` with the reason.
        """
        try:
            nvml = self._nvml
            if nvml is None:
                import pynvml as nvml  # nvidia-ml-py, a declared dependency
                self._nvml = nvml
            nvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError (no driver / library)
            return self._unavailable(f"NVML could not be initialised: {exc}")
        try:
            for dev in self.devices:
                self._handles.append((dev, nvml.nvmlDeviceGetHandleByUUID(dev["uuid"])))
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception as exc:
            self._shutdown()
            return self._unavailable(f"NVML could not open leased GPU(s) {[d['uuid'] for d in self.devices]}: {exc}")
        now_us = int(time.time() * 1e6)  # NVML sample buffers: only what comes after this instant
        self._last_seen = {(d["uuid"], kind): now_us for d in self.devices for kind in self._sample_kinds()}
        self._started_at = self.clock()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._thread.start()
        self.status = {"status": "running", "file": TELEMETRY, "driver": driver, **self._settings()}
        return dict(self.status)

    def stop(self) -> dict[str, Any]:
        """Stop the thread, write the final file and return the final status record."""
        if self._thread is None:
            return dict(self.status)
        self._stop.set()
        self._thread.join(timeout=max(5.0, 3 * self.interval_s))
        if not self._thread.is_alive():  # a thread stuck in NVML keeps its rows to itself
            self._poll()  # the last instants of the run
        self._write(final=True)
        self._shutdown()
        elapsed = max(self.clock() - (self._started_at or 0.0), 1e-9)
        counts = {s: sum(1 for r in self._rows if r["source"] == s) for s in SOURCES}
        self.status = {
            "status": "recorded", "file": TELEMETRY, "driver": self.status.get("driver"), **self._settings(),
            "polls": self._polls, "rows": len(self._rows), "rows_by_source": counts, "flushes": self._flushes,
            "sampled_s": round(elapsed, 3), "sampler_busy_s": round(self._busy_s, 6),
            "sampler_busy_fraction": self._busy_s / elapsed,
            "unsupported_queries": sorted(self._unsupported), "errors": list(self._errors),
        }
        self._thread = None
        return dict(self.status)

    def _settings(self) -> dict[str, Any]:
        return {"devices": self.devices, "interval_s": self.interval_s, "flush_interval_s": self.flush_interval_s,
                "nvml_samples": self.use_samples}

    def _unavailable(self, reason: str) -> dict[str, Any]:
        self.status = {"status": "unavailable", "reason": reason, **self._settings()}
        return dict(self.status)

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()

    # -- sampling ----------------------------------------------------------------

    def _sample_kinds(self) -> list[int]:
        if not self.use_samples:
            return []
        return [self._nvml.NVML_GPU_UTILIZATION_SAMPLES, self._nvml.NVML_MEMORY_UTILIZATION_SAMPLES]

    def _loop(self) -> None:
        next_flush = time.monotonic() + self.flush_interval_s
        while not self._stop.wait(self.interval_s):
            self._poll()
            if time.monotonic() >= next_flush:
                self._write()
                next_flush = time.monotonic() + self.flush_interval_s

    def _note(self, uuid: str, what: str, exc: Exception) -> None:
        nvml = self._nvml
        if isinstance(exc, getattr(nvml, "NVMLError_NotSupported", ())):
            self._unsupported.add(f"{uuid}:{what}")
            return
        msg = f"{uuid}: {what}: {exc}"
        if msg not in self._errors and len(self._errors) < _MAX_ERRORS:
            self._errors.append(msg)

    def _query(self, uuid: str, what: str, fn: Callable[[], Any]) -> Any:
        if f"{uuid}:{what}" in self._unsupported:
            return None
        try:
            return fn()
        except Exception as exc:
            self._note(uuid, what, exc)
            return None

    def _poll(self) -> None:
        begin = time.perf_counter()
        nvml = self._nvml
        for dev, h in self._handles:
            t = self.clock()
            u = dev["uuid"]
            util = self._query(u, "utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(h))
            mem = self._query(u, "memory", lambda: self._memory(h))
            power = self._query(u, "power", lambda: nvml.nvmlDeviceGetPowerUsage(h))
            clock = self._query(u, "sm_clock", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
            self._rows.append({
                "t": t, "gpu_index": dev["index"], "gpu_uuid": dev["uuid"], "source": "poll",
                "gpu_util_pct": float(util.gpu) if util is not None else None,
                "mem_util_pct": float(util.memory) if util is not None else None,
                "memory_used_mib": mem.used / _MIB if mem is not None else None,
                "memory_total_mib": mem.total / _MIB if mem is not None else None,
                "power_w": power / 1000.0 if power is not None else None,  # NVML reports milliwatts
                "sm_clock_mhz": float(clock) if clock is not None else None,
            })
            self._drain_buffers(dev, h)
        self._polls += 1
        self._busy_s += time.perf_counter() - begin

    def _memory(self, h: Any) -> Any:
        nvml = self._nvml
        if self._memory_v2:
            try:  # v2 excludes driver-reserved memory, as nvidia-smi does (and gpus.py)
                return nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2)
            except Exception:
                self._memory_v2 = False
                self._unsupported.add("all:memory_v2")
        return nvml.nvmlDeviceGetMemoryInfo(h)

    def _drain_buffers(self, dev: dict, h: Any) -> None:
        """NVML's utilisation sample buffers since the last drain, mapped onto the run clock."""
        nvml = self._nvml
        for kind in self._sample_kinds():
            key = (dev["uuid"], kind)
            column = "gpu_util_pct" if kind == nvml.NVML_GPU_UTILIZATION_SAMPLES else "mem_util_pct"
            try:
                value_type, samples = nvml.nvmlDeviceGetSamples(h, kind, self._last_seen[key])
            except Exception as exc:
                if not isinstance(exc, getattr(nvml, "NVMLError_NotFound", ())):  # NotFound: nothing new
                    self._note(dev["uuid"], f"samples:{column}", exc)
                continue
            offset = time.time() - self.clock()  # NVML stamps samples in wall-clock microseconds
            for s in samples:
                ts = int(s.timeStamp)
                if ts <= self._last_seen[key]:
                    continue
                row = {c: None for c in TELEMETRY_SCHEMA.names}
                row.update(t=ts / 1e6 - offset, gpu_index=dev["index"], gpu_uuid=dev["uuid"], source="nvml_samples")
                row[column] = _sample_value(nvml, value_type, s.sampleValue)
                self._rows.append(row)
            if samples:
                self._last_seen[key] = max(self._last_seen[key], max(int(s.timeStamp) for s in samples))

    def _write(self, final: bool = False) -> None:
        """One part with the rows since the last write; `final`: the whole table in place of the parts."""
        from ..records.atomicfile import atomic_write_table
        from ..evidence.parts import PARTS_DIR, part_files, part_name, write_part

        begin = time.perf_counter()
        fresh = self._rows[self._converted:]
        try:
            if fresh:
                batch = pa.RecordBatch.from_pylist(fresh, schema=TELEMETRY_SCHEMA)
                self._batches.append(batch)
                self._converted += len(fresh)
                if not final:
                    parts = self.path.parent / PARTS_DIR
                    parts.mkdir(exist_ok=True)
                    self._seq += 1
                    write_part(parts / part_name(TELEMETRY_STEM, self._seq), pa.Table.from_batches([batch]))
            if final:
                atomic_write_table(self.path, pa.Table.from_batches(self._batches, schema=TELEMETRY_SCHEMA))
                for f in part_files(self.path.parent, TELEMETRY_STEM) or []:
                    f.unlink()
            self._flushes += 1
        except OSError as exc:
            self._note("-", "write", exc)
        self._busy_s += time.perf_counter() - begin


def read_telemetry(evidence_dir: Path | str) -> tuple[Any, str | None]:
    """(DataFrame sorted by time, None), or (empty DataFrame, why) when there is no readable telemetry.

    The whole `telemetry.parquet` of a finished sampler, else the parts of a running or
    crashed one, in sequence order.
    """
    from ..evidence.parts import part_files, read_part

    empty = TELEMETRY_SCHEMA.empty_table().to_pandas()
    d = Path(evidence_dir)
    files = [d / TELEMETRY] if (d / TELEMETRY).is_file() else (part_files(d, TELEMETRY_STEM) or [])
    if not files:
        return empty, f"{TELEMETRY} not found (nor telemetry parts)"
    pieces = []
    for f in files:
        try:
            table = pq.read_table(f) if f.suffix == ".parquet" else read_part(f)
        except Exception as exc:  # truncated or foreign file
            return empty, f"{f.relative_to(d)} is not readable: {exc}"
        missing = [n for n in TELEMETRY_SCHEMA.names if n not in table.column_names]
        if missing:
            return empty, f"{f.relative_to(d)} lacks column(s) {missing}"
        pieces.append(table.select(TELEMETRY_SCHEMA.names).cast(TELEMETRY_SCHEMA))
    df = pa.concat_tables(pieces).to_pandas()
    return df.sort_values(["t", "gpu_index", "source"], kind="stable").reset_index(drop=True), None


@contextlib.contextmanager
def beside_run(writer, devices: Sequence[dict[str, Any]] | None, settings: dict[str, Any] | None,
               nvml: Any = None) -> Iterator[TelemetrySampler | None]:
    """Sample the leased `devices` while the body runs; record the outcome in the manifest.

    `devices` None (no GPU lease: a CPU run) or `settings['enabled']` false records
    why nothing was sampled. Whatever happens to NVML, the body runs.
    """
    settings = dict(settings or {})
    if not devices:
        writer.update_manifest(telemetry={"status": "not_applicable", "reason": "no GPU lease: a CPU run"})
        yield None
        return
    if not settings.get("enabled", True):
        writer.update_manifest(telemetry={"status": "disabled", "reason": "probes telemetry.enabled is false"})
        yield None
        return
    sampler = TelemetrySampler(
        writer.path / TELEMETRY, devices, writer.clock, interval_s=float(settings.get("interval_s", 1.0)),
        flush_interval_s=float(settings.get("flush_interval_s", 10.0)),
        nvml_samples=bool(settings.get("nvml_samples", True)), nvml=nvml)
    status = sampler.start()
    writer.update_manifest(telemetry=status)
    if status["status"] != "running":
        writer.logger.warning("telemetry not started: %s; the run goes on without it", status.get("reason"))
    else:
        writer.logger.info("telemetry: sampling GPU(s) %s every %g s into %s",
                           [d["uuid"] for d in sampler.devices], sampler.interval_s, TELEMETRY)
    try:
        yield sampler
    finally:
        if status["status"] == "running":
            final = sampler.stop()
            if not writer.finished:
                writer.update_manifest(telemetry=final)
            writer.logger.info("telemetry: %d rows, sampler busy %.3f s (%.3f%% of %.1f s)", final["rows"],
                               final["sampler_busy_s"], 100 * final["sampler_busy_fraction"], final["sampled_s"])
