"""Recipe/source hashing: stable under file order, sensitive to one byte, blind to caches."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rl_pipeline_bench import backends as registry
from rl_pipeline_bench.provenance import recipes as provenance
from rl_pipeline_bench.provenance.recipes import ProvenanceError

REPO = Path(__file__).resolve().parents[1]
BACKENDS = registry.names(REPO)


def copy_tree(dest: Path, backends=BACKENDS) -> Path:
    """A scratch copy of the real recipe and source files (so edits never touch the checkout)."""
    files = set(provenance.source_files(REPO))
    for b in backends:
        files |= set(provenance.recipe_files(b, REPO))
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest / rel)
    return dest


def test_hash_is_independent_of_order(tmp_path):
    for name, text in {"a.txt": "1", "b/c.txt": "2", "d.txt": "3"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    h1, f1 = provenance.hash_files(tmp_path, ["a.txt", "b/c.txt", "d.txt"])
    h2, f2 = provenance.hash_files(tmp_path, ["d.txt", "a.txt", "b/c.txt", "a.txt"])
    assert h1 == h2 and f1 == f2
    assert list(f1) == sorted(f1)


def test_every_backend_has_a_complete_recipe():
    manifest = provenance.recipe_manifest(REPO)
    assert set(manifest) == set(BACKENDS) and {"reference", "art", "skyrl"} <= set(BACKENDS)
    assert len(set(manifest.values())) == len(BACKENDS)  # distinct recipes, distinct hashes
    for b in BACKENDS:
        files = provenance.recipe_files(b, REPO)
        for name in ("setup.sh", "env.sh", "pins.env"):
            assert f"containers/{b}/{name}" in files
        assert provenance.recipe_dockerfile(b, REPO) in files
        assert f"src/rl_pipeline_bench/backends/{b}/__init__.py" in files
        # One folder is one recipe: nothing of another backend's folder or package.
        others = [o for o in BACKENDS if o != b]
        assert not [f for f in files if any(f.startswith((f"containers/{o}/", f"src/rl_pipeline_bench/backends/{o}/")) for o in others)]
    assert {"pyproject.toml", "uv.lock"} <= set(provenance.recipe_files("reference", REPO))
    assert "uv.lock" not in provenance.recipe_files("art", REPO)


def test_recipe_folders_and_backend_packages_match():
    """Every registered backend has a recipe folder and every recipe folder a backend."""
    folders = {p.name for p in (REPO / "containers").iterdir() if p.is_dir() and p.name != "common"}
    assert folders == set(BACKENDS)


def test_framework_images_share_one_dockerfile_and_keep_their_own_recipe_hashes(tmp_path):
    """ART and SkyRL build from containers/framework.Dockerfile (build arg RL_BENCH_BACKEND);
    each recipe hash covers that file and its own folder's bytes, and no other backend's."""
    shared = "containers/framework.Dockerfile"
    for b in ("art", "skyrl"):
        assert provenance.recipe_dockerfile(b, REPO) == shared and shared in provenance.recipe_files(b, REPO)
        assert not (REPO / "containers" / b / "Dockerfile").exists()
    assert provenance.recipe_dockerfile("reference", REPO) == "containers/reference/Dockerfile"
    assert shared not in provenance.recipe_files("reference", REPO)
    assert 'ARG RL_BENCH_BACKEND' in (REPO / shared).read_text()
    root = copy_tree(tmp_path)
    before = provenance.recipe_manifest(root)
    (root / shared).write_text((root / shared).read_text() + "# one more line\n")
    after = provenance.recipe_manifest(root)
    assert after["art"] != before["art"] and after["skyrl"] != before["skyrl"] and after["reference"] == before["reference"]
    setup = root / "containers" / "skyrl" / "setup.sh"
    setup.write_text(setup.read_text() + "# one more line\n")
    again = provenance.recipe_manifest(root)
    assert again["skyrl"] != after["skyrl"] and again["art"] == after["art"]


def test_pins_are_the_seed_commits():
    assert provenance.read_pins("art", REPO)["ART_COMMIT"] == "2ebfc1c2a38dbeeaeefac998323b476989602942"
    assert provenance.read_pins("skyrl", REPO)["SKYRL_COMMIT"] == "52063b6567a350e02d326699cd7d0f380bbad466"


def test_one_changed_byte_changes_only_its_recipe(tmp_path):
    root = copy_tree(tmp_path)
    before = provenance.recipe_manifest(root)
    src_before = provenance.source_manifest(root)
    pins = root / "containers" / "art" / "pins.env"
    data = bytearray(pins.read_bytes())
    data[-2] ^= 1
    pins.write_bytes(bytes(data))
    after = provenance.recipe_manifest(root)
    assert after["art"] != before["art"]
    assert after["skyrl"] == before["skyrl"] and after["reference"] == before["reference"]
    assert provenance.source_manifest(root) == src_before
    rec_before = provenance.recipe_record("skyrl", root)
    assert provenance.changed_files(rec_before["files"], provenance.recipe_record("skyrl", root)["files"]) == []


def test_source_hash_sees_code_and_ignores_caches(tmp_path):
    root = copy_tree(tmp_path, backends=())
    h0 = provenance.source_manifest(root)
    pkg = root / "src" / "rl_pipeline_bench"
    (pkg / "__pycache__").mkdir(exist_ok=True)
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0junk")
    (pkg / "stray.pyc").write_bytes(b"\0")
    (root / ".snakemake").mkdir()
    (root / "rules" / ".pytest_cache").mkdir(parents=True)
    (root / "rules" / ".pytest_cache" / "v").write_text("x")
    assert provenance.source_manifest(root) == h0
    (pkg / "provenance" / "recipes.py").write_text((pkg / "provenance" / "recipes.py").read_text() + "\n")
    h1 = provenance.source_manifest(root)
    assert h1 != h0
    (pkg / "new_module.py").write_text("")
    assert provenance.source_manifest(root) not in (h0, h1)


def test_hash_matches_sha256sum_lines(tmp_path):
    """The combined digest is sha256 of `sha256sum`-format lines, checkable by hand."""
    (tmp_path / "x").write_text("hello")
    digest, files = provenance.hash_files(tmp_path, ["x"])
    import hashlib

    assert files["x"] == hashlib.sha256(b"hello").hexdigest()
    assert digest == hashlib.sha256(f"{files['x']}  x\n".encode()).hexdigest()


def test_incomplete_recipe_names_missing_files(tmp_path):
    root = copy_tree(tmp_path)
    dockerfile = root / "containers" / "reference" / "Dockerfile"
    kept = dockerfile.read_bytes()
    dockerfile.unlink()
    with pytest.raises(ProvenanceError, match="reference.*missing containers/reference/Dockerfile"):
        provenance.recipe_record("reference", root)
    dockerfile.write_bytes(kept)
    (root / "containers" / "framework.Dockerfile").unlink()
    with pytest.raises(ProvenanceError, match="skyrl.*missing containers/framework.Dockerfile"):
        provenance.recipe_record("skyrl", root)
    with pytest.raises(ProvenanceError, match=re.escape(f"unknown backend 'vllm' (registered backends: {', '.join(BACKENDS)})")):
        provenance.recipe_files("vllm", root)
    (root / "containers" / "reference" / "env.sh").unlink()
    (root / "uv.lock").unlink()
    with pytest.raises(ProvenanceError, match="missing containers/reference/env.sh, uv.lock"):
        provenance.recipe_files("reference", root)


def test_bad_pins_line(tmp_path):
    root = copy_tree(tmp_path)
    (root / "containers" / "art" / "pins.env").write_text("ART_COMMIT 2ebf\n")
    with pytest.raises(ProvenanceError, match=r"pins.env:1: expected KEY=VALUE"):
        provenance.read_pins("art", root)


def test_seed_one_liner_for_kubernetes_source_record():
    """The seed's exact command must work (needs cli.ROOT, cli.recipe_manifest, cli.source_manifest)."""
    code = ("import json; from rl_pipeline_bench.cli import ROOT, recipe_manifest, source_manifest; "
            "print(json.dumps(dict(source_sha256=source_manifest(), recipe_sha256=recipe_manifest(ROOT))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"source_sha256": provenance.source_manifest(REPO), "recipe_sha256": provenance.recipe_manifest(REPO)}


def test_module_cli_check_and_setup_manifest(tmp_path):
    """`python -m rl_pipeline_bench.provenance` is what images and setup scripts run (stdlib only)."""
    root = copy_tree(tmp_path / "root")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    rec = provenance.recipe_record("reference", root)["sha256"]
    src = provenance.source_manifest(root)
    base = [sys.executable, "-m", "rl_pipeline_bench.provenance"]
    ok = subprocess.run(base + ["check", "--root", str(root), "--backend", "reference", "--recipe-sha256", rec,
                                "--source-sha256", src], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(base + ["check", "--root", str(root), "--backend", "reference", "--recipe-sha256", "0" * 64,
                                 "--source-sha256", src], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and rec in bad.stderr and "0" * 64 in bad.stderr
    missing = subprocess.run(base + ["check", "--root", str(root), "--backend", "reference"], capture_output=True, text=True, env=env)
    assert missing.returncode == 1 and "identity is missing" in missing.stderr
    prefix = tmp_path / "prefix"
    made = subprocess.run(base + ["setup-manifest", "--root", str(root), "--backend", "reference", "--prefix", str(prefix),
                                  "--fact", "uv=uv 0.0"], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stderr
    manifests = provenance.load_setup_manifests(prefix)
    m = manifests["reference.json"]
    assert m["recipe_sha256"] == rec and m["source_sha256"] == src and m["facts"] == {"uv": "uv 0.0"}
    assert "pytest" in {k.lower() for k in m["packages"]}
    ident = provenance.native_identity("reference", prefix, root)
    assert ident["requested_recipe_sha256"] == rec and "not proven" in ident["recipe_proof"]
    with pytest.raises(ProvenanceError, match="no setup_manifests"):
        provenance.load_setup_manifests(tmp_path)


@pytest.mark.e2e
def test_provenance_rules_write_records(tmp_path):
    """rules/provenance.smk through Snakemake on a scratch copy; an edit re-runs the recipe rule."""
    root = copy_tree(tmp_path)
    (root / "Snakefile").write_text('include: "rules/imports.smk"\ninclude: "rules/provenance.smk"\n')
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "-d", str(root), "-s", str(root / "Snakefile"),
           "results/provenance/recipes/art.json", "results/provenance/source.json"]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    art = json.loads((root / "results/provenance/recipes/art.json").read_text())
    assert art["sha256"] == provenance.recipe_record("art", root)["sha256"]
    assert json.loads((root / "results/provenance/source.json").read_text())["sha256"] == provenance.source_manifest(root)
    (root / "containers" / "art" / "env.sh").write_text((root / "containers" / "art" / "env.sh").read_text() + "# changed\n")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((root / "results/provenance/recipes/art.json").read_text())["sha256"] != art["sha256"]


def _bash(script: str, env_extra: dict, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RL_BENCH_ENV_ROOT", "CUDA_HOME", "SKYRL_USE_CUDA_COMPAT")}
    env.update(env_extra)
    return subprocess.run(["bash", str(REPO / "containers" / script), *args], capture_output=True, text=True, env=env, timeout=60)


def test_setup_never_touches_an_existing_prefix(tmp_path):
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    (prefix / "something").write_text("user data")
    for backend in BACKENDS:
        proc = _bash(f"{backend}/setup.sh", {"RL_BENCH_ENV_ROOT": str(prefix)})
        assert proc.returncode != 0 and "exists and is not empty" in proc.stderr, proc.stderr
    assert sorted(p.name for p in prefix.iterdir()) == ["something"]
    proc = _bash("reference/setup.sh", {"RL_BENCH_ENV_ROOT": "relative/prefix"})
    assert proc.returncode != 0 and "must be absolute" in proc.stderr
    proc = _bash("art/setup.sh", {})
    assert proc.returncode != 0 and "set RL_BENCH_ENV_ROOT" in proc.stderr


def _fake_prefix(tmp_path: Path, backend: str, venv: str) -> Path:
    """Fixture: the shape setup_{backend}.sh leaves (manifest + venv python), without installing anything."""
    prefix = tmp_path / f"{backend}_env"
    (prefix / "setup_manifests").mkdir(parents=True)
    (prefix / "setup_manifests" / f"{backend}.json").write_text("{}")
    (prefix / venv / "bin").mkdir(parents=True)
    (prefix / venv / "bin" / "python").symlink_to(sys.executable)
    return prefix


def test_env_wrappers_activate_only_a_provisioned_prefix(tmp_path):
    prefix = _fake_prefix(tmp_path, "reference", "reference/.venv")
    show = ["bash", "-c", 'echo "$RL_BENCH_RUNTIME|$RL_BENCH_BACKEND|$VIRTUAL_ENV|$RL_BENCH_SETUP_MANIFEST_DIR|$(command -v python)"']
    proc = _bash("reference/env.sh", {"RL_BENCH_ENV_ROOT": str(prefix)}, *show)
    assert proc.returncode == 0, proc.stderr
    venv = prefix / "reference" / ".venv"
    assert proc.stdout.strip() == f"native|reference|{venv}|{prefix}/setup_manifests|{venv}/bin/python"

    (prefix / "setup_manifests" / "reference.json").unlink()
    proc = _bash("reference/env.sh", {"RL_BENCH_ENV_ROOT": str(prefix)}, "true")
    assert proc.returncode != 0 and "setup_manifests/reference.json is missing" in proc.stderr

    art = _fake_prefix(tmp_path, "art", "art/.venv")
    proc = _bash("art/env.sh", {"RL_BENCH_ENV_ROOT": str(art)}, "true")
    assert proc.returncode != 0 and "CUDA_HOME" in proc.stderr
    proc = _bash("art/env.sh", {"RL_BENCH_ENV_ROOT": str(art), "CUDA_HOME": str(tmp_path)}, "true")
    assert proc.returncode != 0 and "no bin/nvcc" in proc.stderr

    sky = _fake_prefix(tmp_path, "skyrl", "skyrl/.venv")
    proc = _bash("skyrl/env.sh", {"RL_BENCH_ENV_ROOT": str(sky)}, "bash", "-c", 'echo "$RL_BENCH_SKYRL_SOURCE"')
    assert proc.returncode == 0 and proc.stdout.strip() == f"{sky}/skyrl"
    proc = _bash("skyrl/env.sh", {"RL_BENCH_ENV_ROOT": str(sky), "SKYRL_USE_CUDA_COMPAT": "1"}, "true")
    assert proc.returncode != 0 and "nvidia/cuda_compat/lib" in proc.stderr
    proc = _bash("skyrl/env.sh", {"RL_BENCH_ENV_ROOT": str(sky)})
    assert proc.returncode != 0 and "usage" in proc.stderr


def test_in_image_identity_recomputes_and_compares_with_the_baked_hashes(tmp_path):
    """What a container run records: its own recomputation, the baked values, the running code."""
    root = copy_tree(tmp_path / "root")
    recipe = provenance.recipe_record("reference", root)["sha256"]
    source = provenance.source_manifest(root)
    env = {provenance.BAKED_RECIPE_ENV: recipe, provenance.BAKED_SOURCE_ENV: source}
    ok = provenance.in_image_identity("reference", root, env)
    assert ok["matches"] and ok["recipe_sha256"] == recipe and ok["source_sha256"] == source, ok["problems"]
    assert ok["running_package"]["matches"] and ok["running_package"]["files"] > 10
    stale = provenance.in_image_identity("reference", root, dict(env, **{provenance.BAKED_SOURCE_ENV: "0" * 64}))
    assert not stale["matches"] and f"recomputed in the container is {source}, the image was baked with {'0' * 64}" in stale["problems"][0]
    # A tree whose package differs from the running code (here: one added module) is caught.
    (root / "src" / "rl_pipeline_bench" / "extra.py").write_text("")
    changed = provenance.in_image_identity("reference", root, {})
    assert not changed["matches"]
    assert changed["running_package"]["differing"] == ["extra.py"]
    assert any("no baked recipe sha256" in p for p in changed["problems"])
