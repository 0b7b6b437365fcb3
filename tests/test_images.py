"""Image builds and preflight against a real Docker-API engine (podman + runc here).

The engine test builds the real reference image (its locked environment, torch
included; downloads from the package index, cached in the engine's build cache) from
a scratch copy of the recipe tree on the debootstrap base image (no image registry is
reachable), passes preflight, then changes one recipe file and expects preflight to
fail naming both hashes. `.ci/setup_podman.sh` provides the engine and the base image;
without a reachable engine the test skips, except in CI (CI=true), where it fails.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from rl_pipeline_bench.provenance import images, recipes as provenance

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


class _RecordingBuildApi:
    """Test double at an edge this machine cannot reach (the CUDA base image and the framework
    downloads): it records what build_image asks the engine to build, then fails the build."""

    def __init__(self):
        self.kwargs = None
        self.api = self

    def build(self, **kwargs):
        from docker.errors import BuildError

        self.kwargs = kwargs
        raise BuildError("recorded, not built", [])


@pytest.mark.parametrize("backend", ["art", "skyrl"])
def test_framework_images_build_from_the_shared_dockerfile(backend, monkeypatch):
    monkeypatch.setenv(images.BUILD_CA_ENV, "none")
    engine = _RecordingBuildApi()
    with pytest.raises(images.ImageError, match="recorded, not built"):
        images.build_image(backend, REPO, client=engine, log=lambda line: None)
    kw = engine.kwargs
    assert kw["dockerfile"] == "containers/framework.Dockerfile"  # a path inside the context
    assert kw["buildargs"]["RL_BENCH_BACKEND"] == backend
    assert kw["buildargs"]["RL_BENCH_RECIPE_SHA256"] == provenance.recipe_record(backend, REPO)["sha256"]
    with tarfile.open(fileobj=kw["fileobj"]) as tar:
        names = set(tar.getnames())
    assert {"containers/framework.Dockerfile", f"containers/{backend}/pins.env", f"containers/{backend}/setup.sh"} <= names


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
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the podman engine (.ci/setup_podman.sh): {exc}")
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
    kw.setdefault("tag", TEST_TAG)
    return images.build_image("reference", root, base_image=BASE_IMAGE, client=client, log=lambda line: None, **kw)


@pytest.fixture(scope="module")
def built(engine, tmp_path_factory):
    root = scratch_tree(tmp_path_factory.mktemp("image") / "tree")
    return root, _build(root, engine)


@pytest.mark.podman
def test_build_preflight_and_stale_recipe(engine, built):
    root, record = built
    want_recipe = provenance.recipe_record("reference", root)["sha256"]
    want_source = provenance.source_manifest(root)
    assert record["recipe_sha256"] == want_recipe and record["source_sha256"] == want_source
    assert record["labels"]["rl-bench.recipe-sha256"] == want_recipe
    assert record["labels"]["rl-bench.source-sha256"] == want_source
    assert record["image_id"].startswith("sha256:") and record["published"] is False and record["digest"] is None
    # The pinned base is the debootstrap image; overriding it with the same name is no override.
    assert record["base_image"] == BASE_IMAGE and record["engine"]["version"]
    assert record["base_image_overridden"] is (BASE_IMAGE != provenance.read_pins("reference", root)["RL_BENCH_BASE_IMAGE"])

    assert record["build_args"] == {"BASE_IMAGE": BASE_IMAGE}
    ok = images.preflight("reference", root, record=record, client=engine)
    assert ok["contents_verified"] and want_recipe in ok["in_image"]

    # One recipe byte changes: preflight fails before anything runs, naming both hashes and the file.
    dockerfile = root / "containers" / "reference" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "# one more line\n")
    new_recipe = provenance.recipe_record("reference", root)["sha256"]
    assert new_recipe != want_recipe
    with pytest.raises(images.PreflightError) as err:
        images.preflight("reference", root, record=record, client=engine)
    msg = str(err.value)
    assert want_recipe in msg and new_recipe in msg
    assert "containers/reference/Dockerfile" in msg and "bench build --backend reference" in msg
    dockerfile.write_text(dockerfile.read_text().removesuffix("# one more line\n"))


@pytest.mark.podman
def test_build_refuses_a_context_that_does_not_match_its_hashes(engine, built):
    """The recipe's own build step recomputes the hashes: a wrong claim never gets labelled."""
    root, _ = built
    bogus = "0" * 64
    with pytest.raises(images.ImageError, match=f"source sha256 of this tree is .*expected {bogus}"):
        _build(root, engine, build_args={"RL_BENCH_SOURCE_SHA256": bogus}, tag="rl-bench-test/reference:bogus")


@pytest.mark.podman
def test_preflight_of_an_image_the_engine_does_not_have(engine, built):
    root, record = built
    gone = dict(record, image_id="sha256:" + "f" * 64)
    with pytest.raises(images.PreflightError, match=r"not in the engine.*bench build --backend reference"):
        images.preflight("reference", root, record=gone, client=engine)


def test_build_ca_comes_from_the_host_trust_store_or_the_setting(tmp_path):
    """A TLS-intercepting proxy's CA reaches the build's downloads; nothing else is implied."""
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    local = tmp_path / "local"
    (local / "corp").mkdir(parents=True)
    (local / "corp" / "proxy.crt").write_text(pem)
    text, record = images.build_ca({}, local)
    assert text == pem and record["files"] == [str(local / "corp" / "proxy.crt")] and record["sha256"]
    assert images.build_ca({}, tmp_path / "none-here") == ("", {"source": str(tmp_path / "none-here"), "files": [], "sha256": None})
    assert images.build_ca({images.BUILD_CA_ENV: "none"}, local)[0] == ""
    chosen = tmp_path / "ca.pem"
    chosen.write_text(pem)
    assert images.build_ca({images.BUILD_CA_ENV: str(chosen)}, local)[1]["files"] == [str(chosen)]
    (tmp_path / "bad.pem").write_text("not a certificate")
    with pytest.raises(images.ImageError, match="no PEM certificate"):
        images.build_ca({images.BUILD_CA_ENV: str(tmp_path / "bad.pem")}, local)
    with pytest.raises(images.ImageError, match="no such file"):
        images.build_ca({images.BUILD_CA_ENV: str(tmp_path / "missing.pem")}, local)
