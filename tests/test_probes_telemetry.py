"""The NVML telemetry sampler: without NVML (this machine, real pynvml), and with an NVML double.

NVML itself cannot be reached here (no NVIDIA driver). The first tests use the real
nvidia-ml-py binding, which fails to initialise exactly as on any GPU-less host.
`FakeNvml` below is a TEST DOUBLE of the few pynvml calls the sampler makes, kept
to that edge only; its numbers are invented and prove nothing about a GPU.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pandas as pd
import pytest

from rl_pipeline_bench.evidence.store import EvidenceWriter
from rl_pipeline_bench.records.timestamps import new_run_id
from rl_pipeline_bench.probes import telemetry
from rl_pipeline_bench.probes.telemetry import TELEMETRY, TelemetrySampler, beside_run, read_telemetry


def _writer(tmp_path):
    return EvidenceWriter(tmp_path, new_run_id("t", "reference", "multi_turn", 1), {"backend": "reference"})


def _manifest(writer):
    return writer.manifest["telemetry"]


def test_without_nvml_the_sampler_records_why_and_the_run_goes_on(tmp_path):
    import pynvml

    with pytest.raises(pynvml.NVMLError):  # the premise: this host has no NVML
        pynvml.nvmlInit()
    w = _writer(tmp_path)
    ran = []
    with beside_run(w, [{"index": 0, "uuid": "GPU-aaaa"}], {"interval_s": 0.05}) as sampler:
        ran.append(True)
    assert ran == [True] and sampler is not None
    t = _manifest(w)
    assert t["status"] == "unavailable" and t["reason"].startswith("NVML could not be initialised")
    assert t["devices"] == [{"index": 0, "uuid": "GPU-aaaa"}]
    assert not (w.path / TELEMETRY).exists()
    w.finish("completed")
    df, why = read_telemetry(w.path)
    assert df.empty and "not found" in why


def test_cpu_runs_and_disabled_telemetry_record_their_reason(tmp_path):
    w = _writer(tmp_path)
    with beside_run(w, None, {}):
        pass
    assert _manifest(w) == {"status": "not_applicable", "reason": "no GPU lease: a CPU run"}
    with beside_run(w, [{"index": 0, "uuid": "GPU-a"}], {"enabled": False}):
        pass
    assert _manifest(w)["status"] == "disabled"


class FakeNvml:
    """TEST DOUBLE of pynvml (see module docstring): devices by UUID; GPU-1 has no power readings."""

    NVML_GPU_UTILIZATION_SAMPLES = 1
    NVML_MEMORY_UTILIZATION_SAMPLES = 2
    NVML_CLOCK_SM = 1
    NVML_VALUE_TYPE_DOUBLE, NVML_VALUE_TYPE_UNSIGNED_INT = 0, 1
    NVML_VALUE_TYPE_UNSIGNED_LONG, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, NVML_VALUE_TYPE_SIGNED_LONG_LONG = 2, 3, 4
    nvmlMemory_v2 = 0x02000028

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    class NVMLError_NotFound(NVMLError):
        pass

    def __init__(self, uuids=("GPU-0", "GPU-1")):
        self.uuids = list(uuids)
        self.shutdown = 0

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shutdown += 1

    def nvmlSystemGetDriverVersion(self):
        return b"999.99"

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.uuids:
            raise self.NVMLError("Not Found")
        return self.uuids.index(uuid)  # handle: position in this double's device list

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=40 + h, memory=20 + h)

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        return SimpleNamespace(used=(1000 + h) * 2**20, total=80000 * 2**20)

    def nvmlDeviceGetPowerUsage(self, h):
        if self.uuids[h] == "GPU-1":
            raise self.NVMLError_NotSupported("Not Supported")
        return 250_000  # milliwatts

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetSamples(self, h, kind, last_seen_us):
        now = int(time.time() * 1e6)
        if now - last_seen_us < 20_000:
            raise self.NVMLError_NotFound("Not Found")
        samples = [SimpleNamespace(timeStamp=ts, sampleValue=SimpleNamespace(uiVal=70 if kind == 1 else 30))
                   for ts in range(last_seen_us + 10_000, now, 10_000)]
        return self.NVML_VALUE_TYPE_UNSIGNED_INT, samples


def test_sampler_writes_telemetry_as_it_goes_on_exactly_the_leased_devices(tmp_path):
    w = _writer(tmp_path)
    fake = FakeNvml(uuids=("GPU-other", "GPU-0", "GPU-1"))  # a device the lease does not hold is never sampled
    devices = [{"index": 3, "uuid": "GPU-0", "name": "x"}, {"index": 5, "uuid": "GPU-1", "name": "x"}]
    with beside_run(w, devices, {"interval_s": 0.02, "flush_interval_s": 0.05}, nvml=fake):
        assert _manifest(w)["status"] == "running" and _manifest(w)["driver"] == "999.99"
        time.sleep(0.4)
        mid, why = read_telemetry(w.path)  # already on disk while the run goes on, as parts
        assert why is None and len(mid) > 0 and not (w.path / TELEMETRY).exists()
        assert list((w.path / "parts").glob("telemetry-*.arrow"))
    t = _manifest(w)
    assert t["status"] == "recorded" and t["polls"] >= 5 and fake.shutdown == 1
    assert t["unsupported_queries"] == ["GPU-1:power"] and t["errors"] == []
    assert 0 <= t["sampler_busy_fraction"] < 1
    df, why = read_telemetry(w.path)
    assert why is None and len(df) == t["rows"] and len(df) >= len(mid)
    assert (w.path / TELEMETRY).is_file() and not list((w.path / "parts").glob("telemetry-*"))  # whole table now
    w.finish("completed")  # the writer's own parts go too; the telemetry table stays
    assert len(read_telemetry(w.path)[0]) == t["rows"]
    assert set(df["gpu_uuid"]) == {"GPU-0", "GPU-1"} and set(df["gpu_index"]) == {3, 5}
    poll = df[df["source"] == "poll"]
    g0 = poll[poll["gpu_uuid"] == "GPU-0"]
    assert (g0["gpu_util_pct"] == 41).all() and (g0["memory_used_mib"] == 1001).all()  # handle 1 in the double
    assert (g0["power_w"] == 250.0).all() and (g0["sm_clock_mhz"] == 1980).all()
    assert poll[poll["gpu_uuid"] == "GPU-1"]["power_w"].isna().all()
    buf = df[df["source"] == "nvml_samples"]
    assert len(buf) > 0 and set(buf["gpu_util_pct"].dropna()) == {70} and set(buf["mem_util_pct"].dropna()) == {30}
    assert df["t"].is_monotonic_increasing and (df["t"] > -1).all()
    assert t["rows_by_source"] == {"poll": len(poll), "nvml_samples": len(buf)}


def test_a_lease_on_a_device_nvml_does_not_know_is_recorded_not_raised(tmp_path):
    w = _writer(tmp_path)
    with beside_run(w, [{"index": 0, "uuid": "GPU-gone"}], {"interval_s": 0.05}, nvml=FakeNvml()):
        pass
    t = _manifest(w)
    assert t["status"] == "unavailable" and "GPU-gone" in t["reason"]


def test_sampler_settings_are_checked():
    with pytest.raises(ValueError, match="interval_s"):
        TelemetrySampler("x", [], lambda: 0.0, interval_s=0)


def test_schema_and_reader_agree(tmp_path):
    df, why = read_telemetry(tmp_path)
    assert list(df.columns) == telemetry.TELEMETRY_SCHEMA.names and why
    (tmp_path / TELEMETRY).write_bytes(b"not parquet")
    assert "not readable" in read_telemetry(tmp_path)[1]
    assert isinstance(df, pd.DataFrame)


def test_parts_of_a_sampler_that_never_stopped_are_readable(tmp_path):
    """A crash leaves the parts written so far; the reader concatenates them in order."""
    w = _writer(tmp_path)
    sampler = TelemetrySampler(w.path / TELEMETRY, [{"index": 0, "uuid": "GPU-0"}], w.clock, interval_s=0.02,
                               flush_interval_s=0.05, nvml=FakeNvml())
    assert sampler.start()["status"] == "running"
    time.sleep(0.3)
    df, why = read_telemetry(w.path)  # no whole table: the parts so far
    assert why is None and len(df) > 0 and not (w.path / TELEMETRY).exists()
    assert df["t"].is_monotonic_increasing
    sampler.stop()
