"""Storage probe: fio's JSON (real output of fio 3.33 on the development machine), a live fio run,
the O_DIRECT fallback in Python, and directories that cannot take the probe.

fio is a Debian package that .ci/setup_fio.sh installs; the live fio test (tier `tool`) skips without it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from system_tools import require_tool

from rl_pipeline_bench.probes import direct_io
from rl_pipeline_bench.probes.fio import FioError, fio_command, fio_path, parse_fio_json
from rl_pipeline_bench.probes.storage import StorageProbeError, run_storage_probe

DATA = Path(__file__).parent / "data" / "fio"
MiB = 1 << 20


def _quiet(msg):
    pass


def test_parse_real_fio_json():
    w = parse_fio_json((DATA / "seqwrite.json").read_text(), "write")
    assert w["engine"] == "fio" and w["fio_version"] == "fio-3.33"
    assert w["bytes"] == 32 * MiB and w["ios"] == 32 and w["runtime_ms"] == 24
    assert w["bandwidth_bytes_per_s"] == 1398101333
    assert w["options"]["direct"] == "1" and w["options"]["end_fsync"] == "1"
    r = parse_fio_json((DATA / "seqread.json").read_text(), "read")
    assert r["bytes"] == 32 * MiB and r["bandwidth_bytes_per_s"] == 932067555


def test_parse_rejects_what_is_not_a_fio_result():
    text = (DATA / "seqwrite.json").read_text()
    with pytest.raises(FioError, match="no 'read' bandwidth|moved no data"):
        parse_fio_json(text, "read")  # the write job moved nothing in the read direction
    broken = json.loads(text)
    broken["jobs"][0]["error"] = 22
    with pytest.raises(FioError, match="error 22"):
        parse_fio_json(json.dumps(broken), "write")
    with pytest.raises(FioError, match="not JSON"):
        parse_fio_json("fio: failed to open", "write")
    with pytest.raises(FioError, match="jobs"):
        parse_fio_json("{}", "write")


def test_fio_command_mirrors_the_seed_dd():
    cmd = fio_command("fio", "/x/f", "write", 4 * MiB, MiB, True)
    assert "--rw=write" in cmd and "--bs=1048576" in cmd and "--direct=1" in cmd and "--end_fsync=1" in cmd
    assert "--invalidate=1" in fio_command("fio", "/x/f", "read", 4 * MiB, MiB, False)


def _listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


@pytest.mark.tool
def test_live_fio_run_leaves_nothing_behind(tmp_path):
    require_tool("fio", "setup_fio.sh")
    assert fio_path()
    record = run_storage_probe(tmp_path / "a" / "b", 8 * MiB, engine="fio", log=_quiet)
    assert record["engine"] == "fio" and record["size_bytes"] == 8 * MiB
    for d in ("write", "read"):
        assert record["results"][d]["bytes"] == 8 * MiB and record["results"][d]["mb_per_s"] > 0
    assert record["file_removed"] and _listing(tmp_path) == []  # the directories it made are gone too


def test_python_o_direct_fallback(tmp_path):
    direct, why = direct_io.supports_direct(tmp_path)
    assert direct, f"this test needs a filesystem with O_DIRECT here: {why}"
    record = run_storage_probe(tmp_path, 3 * MiB + 5, block_bytes=MiB, engine="python", log=_quiet)
    assert record["engine"] == "python" and record["direct"] is True
    assert record["size_bytes"] == 4 * MiB  # rounded up to whole blocks
    assert record["results"]["write"]["bytes"] == record["results"]["read"]["bytes"] == 4 * MiB
    assert record["results"]["write"]["direct"] and record["results"]["read"]["mb_per_s"] > 0
    assert _listing(tmp_path) == []


def test_direct_io_round_trip_and_alignment(tmp_path):
    f = tmp_path / "f"
    w = direct_io.write_file(f, 2 * MiB, MiB, direct=True)
    assert w["bytes"] == 2 * MiB and f.stat().st_size == 2 * MiB
    assert direct_io.read_file(f, MiB, direct=True)["bytes"] == 2 * MiB
    with pytest.raises(ValueError):
        direct_io.write_file(tmp_path / "g", 1000, 1000, direct=True)  # not 4 KiB aligned


def test_too_small_directory_names_it_and_the_space_needed(tmp_path):
    target = tmp_path / "new" / "dir"
    huge = 1 << 60
    with pytest.raises(StorageProbeError) as err:
        run_storage_probe(target, huge, log=_quiet)
    msg = str(err.value)
    assert str(target) in msg and "free" in msg and "needs 1048576.0 TiB" in msg and "headroom" in msg
    assert _listing(tmp_path) == []  # the directories it created were removed again


def test_not_writable_directory_is_refused(tmp_path):
    if os.geteuid() == 0:  # root writes anywhere a mode allows; /proc refuses new files even to root
        target = Path("/proc")
    else:
        target = tmp_path / "ro"
        target.mkdir()
        target.chmod(0o500)
    with pytest.raises(StorageProbeError, match="not writable") as err:
        run_storage_probe(target, MiB, log=_quiet)
    assert str(target) in str(err.value) and "needs to write" in str(err.value)


def test_a_file_is_not_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StorageProbeError, match="not a directory"):
        run_storage_probe(f, MiB, log=_quiet)
    assert f.read_text() == "x"


def test_bench_probe_storage_reads_its_settings_from_the_spec(config, tmp_path, capsys):
    """The rule's command (`--spec` only) measures with the spec's settings and names the spec;
    flags beside --spec are refused; by hand, flags override the spec resolved from --config."""
    import yaml

    from rl_pipeline_bench.cli import main as bench
    from rl_pipeline_bench.settings.spec import build_spec, write_spec

    config["probes"]["storage"].update(directory=str(tmp_path / "scratch"), engine="python")
    config["suites"]["smoke"]["probes"]["storage"]["size_bytes"] = 2 * MiB
    spec = write_spec(build_spec(config, "smoke"), tmp_path / "specs" / f"{build_spec(config, 'smoke')['id']}.json")
    out = tmp_path / "storage.json"
    assert bench(["probe", "storage", "--spec", str(spec.path), "--output", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["size_bytes"] == 2 * MiB and record["engine"] == "python"
    assert record["directory"] == str(tmp_path / "scratch") and record["label"] == "smoke"
    assert record["spec"] == {"id": spec.id, "hash": spec.hash, "path": str(spec.path), "overridden": []}
    assert not (tmp_path / "scratch").exists()

    capsys.readouterr()
    assert bench(["probe", "storage", "--spec", str(spec.path), "--size-bytes", str(MiB), "--output", str(out)]) == 2
    assert "--size-bytes and --spec" in capsys.readouterr().err  # one line from bench's error handler

    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    assert bench(["probe", "storage", "--configfile", str(cfg), "--suite", "smoke", "--size-bytes", str(MiB),
                  "--output", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["size_bytes"] == MiB and record["spec"]["overridden"] == ["size_bytes"]
    assert record["spec"]["id"] == spec.id and record["spec"]["path"] is None
