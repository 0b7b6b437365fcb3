"""GPU inventory and `bench gpus`: the inventory-file seam, its validation, and the lease column.

The real-NVML test runs only where NVML works (the GPU machine); elsewhere it is skipped
with the reason, and the no-NVML message is checked instead.
"""

from __future__ import annotations

import argparse
import json

import pytest
from lease_helpers import gpu, uuid_of, write_inventory

from rl_pipeline_bench.commands.gpus import cmd_gpus, gpus_report
from rl_pipeline_bench.host.gpus import INVENTORY_ENV, InventoryError, query_inventory
from rl_pipeline_bench.leases import choose_gpu_set


def _nvml_error() -> str | None:
    try:
        query_inventory({})
    except InventoryError as exc:
        return str(exc)
    return None


@pytest.fixture
def inv(tmp_path, monkeypatch):
    path = write_inventory(tmp_path / "inventory.json", [gpu(0), gpu(1, used_mib=3000, procs=(1234, 5678))])
    monkeypatch.setenv(INVENTORY_ENV, str(path))
    monkeypatch.setenv("RL_BENCH_LOCK_DIR", str(tmp_path / "locks"))
    return path


def test_inventory_file_is_read(inv):
    got = query_inventory()
    assert "test seam" in got.source and got.driver == "570.fixture"
    assert [g.index for g in got.gpus] == [0, 1]
    g1 = got.by_uuid()[uuid_of(1)]
    assert g1.memory_used_mib == 3000 and [p.pid for p in g1.processes] == [1234, 5678]


@pytest.mark.parametrize("content,message", [
    ({"gpus": []}, "expected a JSON list"),
    ([{"index": 0}], "entry 0: missing 'processes'"),
    ([{**gpu(0), "uuid": 7}], "entry 0: 'uuid' must be str"),
    ([{**gpu(0), "memory_used_mib": True}], "'memory_used_mib' must be int"),
    ([gpu(0), {**gpu(1), "index": 0}], "duplicate index 0"),
    ([gpu(0), gpu(1, uuid=uuid_of(0))], f"duplicate uuid '{uuid_of(0)}'"),
    ([{**gpu(0), "processes": [{"used_memory_mib": 3}]}], "processes[0]: missing 'pid'"),
])
def test_malformed_inventory_named(tmp_path, content, message):
    path = tmp_path / "inv.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InventoryError) as exc:
        query_inventory({INVENTORY_ENV: str(path)})
    assert message in str(exc.value) and str(path) in str(exc.value)


def test_missing_and_unparseable_inventory(tmp_path):
    with pytest.raises(InventoryError, match="does not exist"):
        query_inventory({INVENTORY_ENV: str(tmp_path / "absent.json")})
    (tmp_path / "bad.json").write_text("[{")
    with pytest.raises(InventoryError, match="is not readable JSON"):
        query_inventory({INVENTORY_ENV: str(tmp_path / "bad.json")})


def test_gpus_report_shows_lease(inv, capsys):
    lease = choose_gpu_set("0", 1, run_id="shown", memory_threshold_mib=1024)
    try:
        report = gpus_report()
        by_index = {g["index"]: g for g in report["gpus"]}
        assert by_index[0]["lease"]["run_id"] == "shown" and by_index[0]["lease"]["state"] == "live"
        assert by_index[1]["lease"] is None and len(by_index[1]["processes"]) == 2
        assert cmd_gpus(argparse.Namespace(json=False, lock_dir=None)) == 0
        text = capsys.readouterr().out
        assert uuid_of(0) in text and "shown (live)" in text and "3000/143771" in text
        assert cmd_gpus(argparse.Namespace(json=True, lock_dir=None)) == 0
        assert json.loads(capsys.readouterr().out)["gpus"][0]["lease"]["record"] == str(lease.record_path)
    finally:
        lease.release()


def test_no_nvml_message(monkeypatch, capsys):
    if _nvml_error() is None:
        pytest.skip("NVML works here; see test_real_nvml_inventory")
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    assert cmd_gpus(argparse.Namespace(json=True, lock_dir=None)) == 1
    assert "NVML" in capsys.readouterr().err


def test_real_nvml_inventory():
    why = _nvml_error()
    if why:
        pytest.skip(f"no NVML on this machine: {why}")
    got = query_inventory({})
    assert got.source == "nvml" and got.driver and got.gpus
    for g in got.gpus:
        assert g.uuid.startswith(("GPU-", "MIG-")) and g.memory_total_mib > 0 and g.name
