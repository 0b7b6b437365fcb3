"""All-reduce probe: nccl-tests' busbw arithmetic, the size sweep, and a real gloo run at world size 2."""

from __future__ import annotations

import pytest

from rl_pipeline_bench.probes import allreduce, reference_data
from rl_pipeline_bench.probes.allreduce import AllReduceError, bus_bandwidth, message_sizes, run_probe, sweep_rows


def test_busbw_is_algbw_times_2_n_minus_1_over_n():
    assert bus_bandwidth(100.0, 1) == 0.0  # nothing crosses a link
    assert bus_bandwidth(100.0, 2) == 100.0
    assert bus_bandwidth(100.0, 4) == 150.0
    assert bus_bandwidth(100.0, 8) == 175.0
    with pytest.raises(ValueError):
        bus_bandwidth(1.0, 0)


def test_sweep_rows_use_decimal_gigabytes():
    rows = sweep_rows([1 << 30], [0.01], world_size=8)
    assert rows[0]["algbw_gbps"] == pytest.approx(107.3741824)  # 2^30 B / 10 ms / 1e9
    assert rows[0]["busbw_gbps"] == pytest.approx(107.3741824 * 1.75)
    assert rows[0]["time_us"] == pytest.approx(1e4) and rows[0]["elements"] == (1 << 28)


def test_sizes_double_like_all_reduce_perf_b8_e1G_f2():
    sizes = message_sizes(8, 1 << 30)
    assert sizes[0] == 8 and sizes[-1] == 1 << 30 and len(sizes) == 28
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    with pytest.raises(AllReduceError):
        message_sizes(2, 16)  # less than one float32
    with pytest.raises(AllReduceError):
        message_sizes(64, 8)


def test_nccl_without_gpus_is_refused_by_name():
    with pytest.raises(AllReduceError, match="needs 2 visible GPU"):
        run_probe(2, "nccl", max_bytes=64)


def test_gloo_all_reduce_at_world_size_2_on_cpu():
    record = run_probe(2, "gloo", min_bytes=8, max_bytes=1 << 16, warmup_iters=1, iters=3, label="test",
                       log=lambda m: None)
    assert record["schema"] == allreduce.ALLREDUCE_SCHEMA and record["world_size"] == 2
    assert [r["bytes"] for r in record["rows"]] == message_sizes(8, 1 << 16)
    for r in record["rows"]:
        assert r["time_us"] > 0 and r["busbw_gbps"] == pytest.approx(r["algbw_gbps"])  # n = 2: factor 1
    assert record["env"]["NCCL_NVLS_ENABLE"] == "0" and record["forced_env"]["NVSHMEM_DISABLE_NVLS"] == "1"
    assert record["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert record["nccl_version"] is None and record["busbw_note"] is None
    assert record["largest"]["bytes"] == 1 << 16


def test_world_size_1_says_bus_bandwidth_needs_two():
    record = run_probe(1, "gloo", min_bytes=8, max_bytes=64, warmup_iters=1, iters=2, log=lambda m: None)
    assert all(r["busbw_gbps"] == 0.0 for r in record["rows"])
    assert "at least 2 GPUs" in record["busbw_note"]


def test_expectations_table_names_its_sources():
    rows = reference_data.allreduce_expectations()
    ids = {r["id"] for r in rows}
    assert {"p4de-inter-node", "p5-inter-node", "h200-nvlink-intra-node"} <= ids
    p4de = next(r for r in rows if r["id"] == "p4de-inter-node")
    assert (p4de["expected_min_gbps"], p4de["expected_max_gbps"]) == (40, 50)
    assert all(r["source"] and r["scope"] in ("inter-node", "intra-node") for r in rows)


def test_probe_settings_follow_the_suite(config):
    from rl_pipeline_bench.probes.settings import merged_probe_settings, probe_settings

    smoke = probe_settings(config, config["suites"]["smoke"])
    assert smoke["allreduce"]["backend"] == "gloo" and smoke["allreduce"]["world_size"] == 2
    assert smoke["allreduce"]["max_bytes"] == 1 << 20  # the smoke suite's own override
    assert smoke["checkpoint"]["device"] == "cpu"
    gpu = probe_settings(config, config["suites"]["reference_gpu"])
    assert gpu["allreduce"]["backend"] == "nccl" and gpu["allreduce"]["world_size"] == 1
    assert gpu["allreduce"]["max_bytes"] == 1 << 30 and gpu["storage"]["size_bytes"] == 4 << 30
    assert "backend" not in merged_probe_settings(config, config["suites"]["smoke"])["allreduce"]
    assert config["probes"]["allreduce"]["max_bytes"] == 1 << 30  # the config itself is not changed
