"""GPU lease supervisor: SPECs, refusals, races, signals, killed supervisors, leftover processes, bad filesystems.

NVML is replaced only by the RL_BENCH_GPU_INVENTORY file (tests/lease_helpers.py
writes fixture inventories); everything else (flock, records, process groups,
signals, psutil) is real.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from lease_helpers import (
    gpu,
    lease_argv,
    lease_env,
    leftovers,
    py,
    record_with_status,
    records,
    uuid_of,
    wait_for,
    write_inventory,
)

from rl_pipeline_bench.host.gpus import InventoryError, query_inventory
from rl_pipeline_bench.leases import (
    EXIT_CLEANUP_UNCONFIRMED,
    EXIT_REFUSED,
    ClearRefused,
    LeaseRefused,
    LockDir,
    GpuSetError,
    choose_gpu_set,
    clear_lease,
    current_lease_gpus,
    lease_command,
    list_leases,
    resolve_gpu_set,
)
from rl_pipeline_bench.leases import procs as lease_procs

HELPERS = Path(__file__).with_name("lease_helpers.py")
WAIT_FOR_FILE = "import pathlib,sys,time\np=pathlib.Path(sys.argv[1]); d=time.time()+30\nwhile not p.exists() and time.time()<d: time.sleep(0.05)"


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A four-GPU fixture inventory and an empty lock dir, also exported for in-process calls."""
    inv = write_inventory(tmp_path / "inventory.json", [gpu(i) for i in range(4)])
    lock_dir = tmp_path / "locks"
    monkeypatch.setenv("RL_BENCH_GPU_INVENTORY", str(inv))
    monkeypatch.setenv("RL_BENCH_LOCK_DIR", str(lock_dir))
    monkeypatch.delenv("RL_BENCH_LEASE_RECORD", raising=False)
    return type("Host", (), {"inv": inv, "lock_dir": lock_dir, "env": lease_env(inv, lock_dir), "tmp": tmp_path})


def run_lease(host, spec, count, run_id, command, timeout=60, **kw):
    return subprocess.run(lease_argv(spec, count, run_id, command, **kw), env=host.env,
                          capture_output=True, text=True, timeout=timeout)


def start_lease(host, spec, count, run_id, command, **kw):
    return subprocess.Popen(lease_argv(spec, count, run_id, command, **kw), env=host.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def refuse(spec, count=1, run_id="r1", **kw) -> LeaseRefused:
    with pytest.raises(LeaseRefused) as exc:
        choose_gpu_set(spec, count, run_id=run_id, memory_threshold_mib=kw.pop("threshold", 1024), **kw)
    return exc.value


# ------------------------------------------------------------------ API and SPECs


def test_lease_command_argv():
    assert lease_command("0,1,2,3", 4, "run-1") == [
        "bench", "lease", "run", "--gpus", "0,1,2,3", "--count", "4", "--run-id", "run-1", "--"]
    argv = lease_command(["0,1", "2,3"], 2, "r", lock_dir="/x/locks", memory_threshold_mib=10)
    assert argv == ["bench", "lease", "run", "--gpus", "0,1", "--gpus", "2,3", "--count", "2", "--run-id", "r",
                    "--lock-dir", "/x/locks", "--memory-threshold-mib", "10", "--"]
    with pytest.raises(GpuSetError):
        lease_command("0,,1", 2, "r")
    with pytest.raises(ValueError):
        lease_command([], 2, "r")


@pytest.mark.parametrize("spec,count,gpu_named,reason", [
    ("0,0", 2, "GPU 0", "more than once"),
    (f"1,{uuid_of(1)}", 2, "GPU 1", "more than once"),
    ("0,1", 4, "SPEC '0,1'", "too few devices"),
    ("0,1,2", 2, "SPEC '0,1,2'", "too many devices"),
    ("7", 1, "GPU 7", "index out of range"),
    ("GPU-does-not-exist", 1, "GPU GPU-does-not-exist", "unknown UUID"),
    (uuid_of(1).upper(), 1, "GPU " + uuid_of(1).upper(), "unknown UUID"),
    ("0,,1", 2, "SPEC '0,,1'", "entry 2 is empty"),
    ("-1", 1, "GPU -1", "not a valid host index"),
    ("", 1, "SPEC ''", "empty GPU SPEC"),
])
def test_malformed_specs(host, spec, count, gpu_named, reason):
    with pytest.raises(GpuSetError) as exc:
        resolve_gpu_set(spec, count, query_inventory())
    assert exc.value.gpu.startswith(gpu_named) and reason in exc.value.reason
    refused = refuse(spec, count)
    text = str(refused)
    assert gpu_named in text and reason in text and "lease-r1.json (not written)" in text
    assert leftovers(host.lock_dir) == []


def test_spec_resolves_indices_and_uuids_in_order(host):
    got = resolve_gpu_set(f"2,{uuid_of(0)}", 2, query_inventory())
    assert [g.index for g in got] == [2, 0]


def test_malformed_spec_cli_exit_code(host):
    proc = run_lease(host, "0,0", 2, "bad", ["true"])
    assert proc.returncode == EXIT_REFUSED
    assert "GPU 0" in proc.stderr and "more than once" in proc.stderr and "lease-bad.json (not written)" in proc.stderr
    assert leftovers(host.lock_dir) == []


# ------------------------------------------------------------------ NVML checks (inventory seam)


def test_foreign_processes_and_memory_refused(host):
    write_inventory(host.inv, [gpu(0, procs=(4242,)), gpu(1, used_mib=2048), gpu(2, used_mib=1024), gpu(3)])
    text = str(refuse("0"))
    assert "GPU 0" in text and "1 compute process(es)" in text and "4242" in text and "(not written)" in text
    text = str(refuse("1"))
    assert "GPU 1" in text and "2048 MiB" in text and "above the 1024 MiB threshold" in text
    assert leftovers(host.lock_dir) == []
    lease = choose_gpu_set("1,2", 2, run_id="ok", memory_threshold_mib=4096)  # threshold is honoured
    try:
        assert [d["index"] for d in lease.data["devices"]] == [1, 2]
    finally:
        lease.release()
    assert leftovers(host.lock_dir) == []


def test_first_free_set_is_taken_and_recorded(host):
    write_inventory(host.inv, [gpu(0, procs=(99,)), gpu(1), gpu(2), gpu(3)])
    lease = choose_gpu_set(["0,1", "2,3"], 2, run_id="multi", memory_threshold_mib=1024, command=["x", "--token=abc"])
    try:
        data = json.loads(lease.record_path.read_text())
        assert data["gpu_set_index"] == 1 and data["gpu_spec"] == "2,3" and data["gpu_specs"] == ["0,1", "2,3"]
        assert data["cuda_visible_devices"] == f"{uuid_of(2)},{uuid_of(3)}"
        assert data["skipped_sets"][0]["gpu_spec"] == "0,1" and "compute process" in data["skipped_sets"][0]["problems"][0]
        assert [d["driver"] for d in data["devices"]] == ["570.fixture"] * 2
        assert data["supervisor"]["pid"] == os.getpid() and data["status"] == "starting"
        assert "test seam" in data["inventory_source"]
        # a second run on an overlapping set is refused, naming GPU, holder and record
        text = str(refuse(["3", "2"], 1, run_id="other"))
        assert f"GPU 3 ({uuid_of(3)})" in text and "reserved by run 'multi'" in text and str(lease.record_path) in text
        assert "set 2 of 2" in text
    finally:
        lease.release()
    assert leftovers(host.lock_dir) == []


def test_unreadable_record_blocks_every_lease(host):
    host.lock_dir.mkdir(mode=0o700)
    bad = host.lock_dir / "lease-broken.json"
    bad.write_text('{"run_id": "broken", "devi')
    text = str(refuse("3"))
    assert "every GPU" in text and "unreadable reservation record" in text and str(bad) in text
    assert leftovers(host.lock_dir) == ["lease-broken.json"]


def test_run_id_collision_and_bad_run_id(host):
    lease = choose_gpu_set("0", 1, run_id="same", memory_threshold_mib=1024)
    try:
        text = str(refuse("1", run_id="same"))
        assert "already exists" in text and str(lease.record_path) in text
    finally:
        lease.release()
    assert "not usable in a record file name" in str(refuse("1", run_id="../escape"))


def test_no_nvml_and_no_inventory_refuses(host, monkeypatch):
    monkeypatch.delenv("RL_BENCH_GPU_INVENTORY")
    try:
        query_inventory()
    except InventoryError:
        pass
    else:
        pytest.skip("NVML works on this machine; the no-NVML refusal cannot be observed here")
    text = str(refuse("0"))
    assert "NVML" in text and "refused without NVML" in text and "SPEC '0'" in text and "(not written)" in text
    assert leftovers(host.lock_dir) == []


def test_malformed_inventory_refuses(host):
    host.inv.write_text(json.dumps([{"index": 0, "name": "x"}]))
    text = str(refuse("0"))
    assert "entry 0: missing" in text and str(host.inv) in text


# ------------------------------------------------------------------ supervised runs


def test_child_env_record_and_exit_code(host):
    code = ("import json,os,sys\nfrom rl_pipeline_bench.leases import current_lease_gpus, current_lease\n"
            "print(json.dumps({'cvd': os.environ['CUDA_VISIBLE_DEVICES'], 'gpus': current_lease_gpus(),"
            " 'rec': current_lease()}))\nsys.exit(7)")
    proc = run_lease(host, f"{uuid_of(2)},1", 2, "envcheck", py(code))
    assert proc.returncode == 7, proc.stderr
    out = json.loads(proc.stdout)
    assert out["cvd"] == f"{uuid_of(2)},{uuid_of(1)}"
    assert out["gpus"] == [{"index": 2, "uuid": uuid_of(2), "name": "Fixture H200 (test inventory)", "driver": "570.fixture"},
                           {"index": 1, "uuid": uuid_of(1), "name": "Fixture H200 (test inventory)", "driver": "570.fixture"}]
    rec = out["rec"]
    assert rec["status"] == "running" and rec["process_group"] == rec["child"]["pid"]
    assert rec["command"][0] == sys.executable and rec["run_id"] == "envcheck"
    assert "released" in proc.stderr and "0/143771 MiB used, 0 compute process(es)" in proc.stderr
    assert leftovers(host.lock_dir) == [] and current_lease_gpus() is None


def test_command_not_found_releases(host):
    proc = run_lease(host, "0", 1, "nocmd", ["/nonexistent/definitely-not-a-command"])
    assert proc.returncode == 127 and "cannot start" in proc.stderr
    assert leftovers(host.lock_dir) == []


def test_race_exactly_one_wins(host):
    release = host.tmp / "release"
    sets = ["0,1", "1,2", "0,2"]  # every pair overlaps
    contenders = [start_lease(host, sets[i % 3], 2, f"race-{i}", py(WAIT_FOR_FILE) + [str(release)]) for i in range(6)]
    try:
        wait_for(lambda: sum(p.poll() is not None for p in contenders) >= 5, timeout=45, what="5 refusals")
        running = [p for p in contenders if p.poll() is None]
        assert len(running) == 1
        refused = [p for p in contenders if p.poll() is not None]
        assert all(p.returncode == EXIT_REFUSED for p in refused)
        recs = records(host.lock_dir)
        assert len(recs) == 1
        data = json.loads(recs[0].read_text())  # whole, valid JSON
        winner_id = data["run_id"]
        assert contenders[int(winner_id.split("-")[1])] is running[0]
        for p in refused:
            err = p.stderr.read()
            assert "lease refused" in err and f"reserved by run '{winner_id}'" in err and str(recs[0]) in err
        assert not [n for n in leftovers(host.lock_dir) if n.endswith(".tmp")]
    finally:
        release.touch()
        for p in contenders:
            p.wait(timeout=30)
    assert running[0].returncode == 0
    assert leftovers(host.lock_dir) == []


def test_disjoint_sets_run_side_by_side(host):
    release = host.tmp / "release"
    a = start_lease(host, "0,1", 2, "left", py(WAIT_FOR_FILE) + [str(release)])
    b = start_lease(host, "2,3", 2, "right", py(WAIT_FOR_FILE) + [str(release)])
    try:
        wait_for(lambda: len([r for r in records(host.lock_dir) if json.loads(r.read_text())["status"] == "running"]) == 2,
                 what="two running leases")
    finally:
        release.touch()
        assert a.wait(timeout=30) == 0 and b.wait(timeout=30) == 0
    assert leftovers(host.lock_dir) == []


def test_clear_refuses_live_record(host):
    release = host.tmp / "release"
    sup = start_lease(host, "1", 1, "livejob", py(WAIT_FOR_FILE) + [str(release)])
    ld = LockDir(host.lock_dir)
    try:
        wait_for(lambda: record_with_status(host.lock_dir, "running"), what="running record")
        (row,) = list_leases(ld)
        assert row["state"] == "live" and row["locks_held"] == {uuid_of(1): True}
        assert {a["role"] for a in row["alive_processes"]} >= {"supervisor", "child"}
        with pytest.raises(ClearRefused, match="still alive"):
            clear_lease(ld, uuid_of(1), "livejob")
        with pytest.raises(ClearRefused, match="no record with run id 'nope'"):
            clear_lease(ld, uuid_of(1), "nope")
        with pytest.raises(ClearRefused, match="does not hold GPU"):
            clear_lease(ld, uuid_of(0), "livejob")
        assert len(records(host.lock_dir)) == 1
    finally:
        release.touch()
        assert sup.wait(timeout=30) == 0
    assert leftovers(host.lock_dir) == []


def test_signals_are_forwarded_to_the_group(host):
    got, ready = host.tmp / "got", host.tmp / "ready"
    code = ("import pathlib,signal,sys,time\n"
            f"def h(s,f):\n pathlib.Path({str(got)!r}).write_text(str(s)); sys.exit(43)\n"
            "signal.signal(signal.SIGTERM,h)\n"
            f"pathlib.Path({str(ready)!r}).touch(); time.sleep(30)")
    sup = start_lease(host, "0", 1, "sigterm", py(code))
    wait_for(ready.exists, what="child ready")
    sup.send_signal(signal.SIGTERM)  # only the supervisor: the child is in its own process group
    assert sup.wait(timeout=30) == 43
    assert got.read_text() == str(int(signal.SIGTERM))
    assert leftovers(host.lock_dir) == []

    sup = start_lease(host, "0", 1, "sigint", ["sleep", "30"])
    wait_for(lambda: record_with_status(host.lock_dir, "running"), what="running record")
    time.sleep(0.3)  # let the gate exec sleep
    sup.send_signal(signal.SIGINT)
    assert sup.wait(timeout=30) == 128 + signal.SIGINT
    assert leftovers(host.lock_dir) == []


def _cmdline(pid: int) -> list[str] | None:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return None


def test_sigkilled_supervisor_leaves_blocking_record(host):
    sup = start_lease(host, "2", 1, "killed", ["sleep", "30"])
    child = None
    try:
        data = wait_for(lambda: record_with_status(host.lock_dir, "running"), what="running record")
        child = data["child"]
        wait_for(lambda: _cmdline(child["pid"]) == ["sleep", "30"], what="gate to exec the command")
        sup.send_signal(signal.SIGKILL)
        sup.wait(timeout=10)
        record = host.lock_dir / "lease-killed.json"
        assert record.exists()
        # blocks even though the inventory shows no compute process on GPU 2
        proc = run_lease(host, "2", 1, "after", ["true"])
        assert proc.returncode == EXIT_REFUSED
        assert f"GPU 2 ({uuid_of(2)})" in proc.stderr and str(record) in proc.stderr and "stale" in proc.stderr
        ld = LockDir(host.lock_dir)
        (row,) = list_leases(ld)
        assert row["state"] == "stale" and row["locks_held"] == {uuid_of(2): False}
        assert [a["pid"] for a in row["alive_processes"]] == [child["pid"]]
        with pytest.raises(ClearRefused, match=f"child pid {child['pid']}"):
            clear_lease(ld, uuid_of(2), "killed")
        os.kill(child["pid"], signal.SIGKILL)  # our own test command, started through the supervisor
        wait_for(lambda: not lease_procs.is_alive(child), what="orphaned child to exit")
        removed = clear_lease(ld, uuid_of(2), "killed")
        assert removed["removed_record"] == str(record) and removed["gpus"][0]["uuid"] == uuid_of(2)
        assert leftovers(host.lock_dir) == []
        assert run_lease(host, "2", 1, "again", ["true"]).returncode == 0
    finally:
        if child and lease_procs.is_alive(child):
            os.kill(child["pid"], signal.SIGKILL)


GRANDCHILD = """
import os, pathlib, sys, time
stop, pidfile, life = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), float(sys.argv[3])
if os.fork() == 0:
    os.setsid()  # leave the process group: only the subreaper still sees it as ours
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # do not hold the test's pipes open
        os.dup2(null, fd)
    if os.fork() == 0:
        pidfile.write_text(str(os.getpid()))
        end = time.time() + life
        while time.time() < end and not stop.exists():
            time.sleep(0.1)
        pathlib.Path(str(pidfile) + ".done").write_text(repr(time.time()))
        os._exit(0)
    os._exit(0)
os.wait()
while not pidfile.exists():
    time.sleep(0.02)
"""


def test_grandchild_blocks_release_until_gone(host):
    stop, pidfile = host.tmp / "stop", host.tmp / "gc.pid"
    sup = start_lease(host, "3", 1, "gc-short", py(GRANDCHILD) + [str(stop), str(pidfile), "3"], cleanup_timeout_s=20)
    wait_for(pidfile.exists, what="grandchild")
    assert (host.lock_dir / "lease-gc-short.json").exists()
    assert sup.wait(timeout=40) == 0
    ended = time.time()
    done = float(Path(str(pidfile) + ".done").read_text())
    assert done <= ended
    assert "waiting up to 20 s for 1 owned process" in sup.stderr.read()
    assert leftovers(host.lock_dir) == []


def test_grandchild_outliving_timeout_keeps_record(host):
    stop, pidfile = host.tmp / "stop", host.tmp / "gc.pid"
    gc = None
    try:
        proc = run_lease(host, "3", 1, "gc-long", py(GRANDCHILD) + [str(stop), str(pidfile), "30"], cleanup_timeout_s=1)
        assert proc.returncode == EXIT_CLEANUP_UNCONFIRMED, proc.stderr
        gc = int(pidfile.read_text())
        record = host.lock_dir / "lease-gc-long.json"
        assert "cleanup unconfirmed" in proc.stderr and str(record) in proc.stderr and f"pid {gc}" in proc.stderr
        data = json.loads(record.read_text())
        assert data["status"] == "cleanup_unconfirmed" and data["exit_code"] == 0
        assert [s["pid"] for s in data["survivors"]] == [gc]
        blocked = run_lease(host, "3", 1, "next", ["true"])
        assert blocked.returncode == EXIT_REFUSED and "status cleanup_unconfirmed" in blocked.stderr
        with pytest.raises(ClearRefused, match=f"pid {gc}"):
            clear_lease(LockDir(host.lock_dir), uuid_of(3), "gc-long")
        stop.touch()
        wait_for(lambda: not lease_procs.is_alive(data["survivors"][0]), what="grandchild to stop")
        clear_lease(LockDir(host.lock_dir), uuid_of(3), "gc-long")
        assert leftovers(host.lock_dir) == []
    finally:
        stop.touch()


# ------------------------------------------------------------------ bad filesystems


def _can_use_mount_namespace() -> str | None:
    if not shutil.which("unshare") or not shutil.which("mount"):
        return "unshare/mount not installed"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create a mount namespace (needs root or CAP_SYS_ADMIN): {probe.stderr.strip()}"
    return None


def fs_scenario(host, mode: str) -> dict:
    why = _can_use_mount_namespace()
    if why:
        pytest.skip(f"tmpfs scenario '{mode}' skipped: {why}")
    base = host.tmp / f"mnt-{mode}"
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, str(HELPERS),
                           "fs-scenario", mode, str(base), str(host.inv)], capture_output=True, text=True, timeout=90)
    if proc.returncode != 0 and "mount:" in proc.stderr:
        pytest.skip(f"mounting a tmpfs is not permitted here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_full_filesystem_leaves_nothing(host):
    out = fs_scenario(host, "full")
    assert out["filler_error"] == "No space left on device"
    assert out["rc"] == EXIT_REFUSED and "No space left on device" in out["stderr"]
    assert "lease-fs-scenario.json (not written)" in out["stderr"] and "GPU 0 (GPU-fixture-0000" in out["stderr"]
    assert out["left"] == ["registry.lock"] and not out["command_ran"]


@pytest.mark.parametrize("mode", ["readonly-missing", "readonly-existing"])
def test_read_only_lock_dir(host, mode):
    if os.geteuid() != 0:  # an unprivileged user cannot write a 0555 directory: no mount needed
        host.lock_dir.mkdir(mode=0o555)
        proc = run_lease(host, "0", 1, "ro", ["true"])
        out = {"rc": proc.returncode, "stderr": proc.stderr, "left": sorted(os.listdir(host.lock_dir))}
    else:
        out = fs_scenario(host, mode)
        assert not out["command_ran"]
    assert out["rc"] == EXIT_REFUSED and "SPEC '0'" in out["stderr"] and "(not written)" in out["stderr"]
    expected = "cannot be created" if mode == "readonly-missing" and os.geteuid() == 0 else "is not writable"
    assert expected in out["stderr"] and "Read-only file system" in out["stderr"] or os.geteuid() != 0
    assert out["left"] == ([] if mode == "readonly-missing" else ["registry.lock"]) or os.geteuid() != 0
