"""Image builds and preflight against a real Docker-API engine (podman + runc here).

The engine test builds the reference image from a scratch copy of the recipe tree on
a debootstrap base image (no registry is reachable), passes preflight, then changes
one recipe file and expects preflight to fail naming both hashes. `.ci/setup_podman.sh`
provides the engine and the base image; without a reachable engine the test skips.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from rl_pipeline_bench import images, provenance

REPO = Path(__file__).resolve().parents[1]
PODMAN_SOCK = "/run/podman/podman.sock"
BASE_IMAGE = os.environ.get("RL_BENCH_BASE_IMAGE", "localhost/rl-bench/debian-python:bookworm")
TEST_TAG = "rl-bench-test/reference:pytest"


def scratch_tree(dest: Path, backend: str = "reference") -> Path:
    for rel in images.context_files(backend, REPO):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest / rel)
    return dest


def test_context_is_exactly_the_hashed_files_and_deterministic(tmp_path):
    root = scratch_tree(tmp_path)
    blob = images.build_context("reference", root)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        names = sorted(tar.getnames())
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())
    hashed = set(provenance.recipe_files("reference", root)) | set(provenance.source_files(root))
    assert set(names) - hashed <= {"README.md"}
    assert hashed <= set(names)
    (root / "results").mkdir()
    (root / "results" / "big.parquet").write_bytes(b"x" * 1000)  # never shipped
    assert images.build_context("reference", root) == blob


def test_unreachable_engine_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    with pytest.raises(images.ImageError, match=r"no Docker-API engine reachable at DOCKER_HOST=unix://.*nothing.sock.*setup_podman.sh"):
        images.engine_client(timeout=5)


def test_missing_image_record_names_the_fix(tmp_path):
    with pytest.raises(images.PreflightError, match=r"never built.*bench build --backend art"):
        images.load_image_record(tmp_path / "results/images/art.json", "art")


@pytest.fixture(scope="module")
def engine():
    if not os.environ.get("DOCKER_HOST") and os.path.exists(PODMAN_SOCK):
        os.environ["DOCKER_HOST"] = f"unix://{PODMAN_SOCK}"
    try:
        client = images.engine_client(timeout=300)
    except images.ImageError as exc:
        pytest.skip(f"no container engine reachable (run `sudo bash .ci/setup_podman.sh`): {exc}")
    from docker.errors import ImageNotFound

    try:
        client.images.get(BASE_IMAGE)
    except ImageNotFound:
        pytest.fail(f"engine is up but base image {BASE_IMAGE} is missing: run `sudo bash .ci/setup_podman.sh`")
    yield client
    try:
        client.images.remove(TEST_TAG, force=True)
    except Exception:  # already gone: nothing to clean
        pass


def _build(root: Path, client, **kw):
    return images.build_image("reference", root, base_image=BASE_IMAGE, client=client, log=lambda line: None,
                              build_args=kw.pop("build_args", {"RL_BENCH_INSTALL_DEPENDENCIES": "0"}),
                              network_mode="none", tag=TEST_TAG, **kw)


def test_build_preflight_and_stale_recipe(engine, tmp_path):
    root = scratch_tree(tmp_path / "tree")
    record = _build(root, engine)
    want_recipe = provenance.recipe_record("reference", root)["sha256"]
    want_source = provenance.source_manifest(root)
    assert record["recipe_sha256"] == want_recipe and record["source_sha256"] == want_source
    assert record["labels"]["rl-bench.recipe-sha256"] == want_recipe
    assert record["labels"]["rl-bench.source-sha256"] == want_source
    assert record["image_id"].startswith("sha256:") and record["published"] is False and record["digest"] is None
    assert record["base_image_overridden"] is True and record["engine"]["version"]

    ok = images.preflight("reference", root, record=record, client=engine, require_dependencies=False)
    assert ok["contents_verified"] and want_recipe in ok["in_image"]

    # A provenance-only image can never pass the preflight of a real run.
    with pytest.raises(images.PreflightError, match="provenance-only"):
        images.preflight("reference", root, record=record, client=engine, verify_contents=False)

    # One recipe byte changes: preflight fails before anything runs, naming both hashes and the file.
    dockerfile = root / "containers" / "reference" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "# one more line\n")
    new_recipe = provenance.recipe_record("reference", root)["sha256"]
    assert new_recipe != want_recipe
    with pytest.raises(images.PreflightError) as err:
        images.preflight("reference", root, record=record, client=engine, require_dependencies=False)
    msg = str(err.value)
    assert want_recipe in msg and new_recipe in msg
    assert "containers/reference/Dockerfile" in msg and "bench build --backend reference" in msg


def test_build_refuses_a_context_that_does_not_match_its_hashes(engine, tmp_path):
    """The recipe's own build step recomputes the hashes: a wrong claim never gets labelled."""
    root = scratch_tree(tmp_path / "tree")
    bogus = "0" * 64
    with pytest.raises(images.ImageError, match=f"source sha256 of this tree is .*expected {bogus}"):
        _build(root, engine, build_args={"RL_BENCH_INSTALL_DEPENDENCIES": "0", "RL_BENCH_SOURCE_SHA256": bogus})


def test_preflight_after_image_removed(engine, tmp_path):
    root = scratch_tree(tmp_path / "tree")
    record = _build(root, engine)
    engine.images.remove(TEST_TAG, force=True)
    with pytest.raises(images.PreflightError, match=r"not in the engine.*bench build --backend reference"):
        images.preflight("reference", root, record=record, client=engine, require_dependencies=False)
