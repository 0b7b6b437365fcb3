"""Backend images: build through a Docker-API engine, record their identity, preflight them.

An image is only trusted if it provably contains the recipe and benchmark source the
controller has now. `build_image` sends exactly the hashed files as the build
context and passes their sha256 as build args; the recipe's own build step refuses
files that do not hash to them, then bakes them into labels. `preflight` runs before
any GPU lease: it compares the image's labels with the controller's hashes and, by
default, recomputes them inside the image, failing with both hashes named.

Engines: whatever `DOCKER_HOST` names (Docker, or podman's `podman system service`).
Images are never pushed.
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from . import recipes as provenance
from .. import paths
from ..paths import ROOT
from ..records.formats import schema_of
from ..records.jsonfile import read_record

IMAGE_SCHEMA = schema_of("image")
LABEL_BACKEND = "rl-bench.backend"
LABEL_RECIPE = "rl-bench.recipe-sha256"
LABEL_SOURCE = "rl-bench.source-sha256"
LABEL_DEPENDENCIES = "rl-bench.dependencies"
# Packaging metadata pyproject.toml refers to; shipped in the context, not hashed.
_AUX_FILES = ("README.md",)
#: PEM file of extra CAs the build's downloads must trust ("none": no extra CAs). Unset:
#: the certificates the host added to its own trust store (Debian's local CA folder).
BUILD_CA_ENV = "RL_BENCH_BUILD_CA_FILE"
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")


class ImageError(RuntimeError):
    """An engine, build or image problem; the message says what to run next."""


class PreflightError(ImageError):
    """The image does not match the controller's recipe/source identity."""


def image_tag(backend: str) -> str:
    return f"rl-bench/{provenance.check_backend(backend)}:local"


def record_path(backend: str, root: Path | str = ROOT) -> Path:
    return paths.image_record(backend, root)


def _docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock (default)"


#: What to do when no engine answers (engine_client's error, the readiness check's fix).
ENGINE_FIX = ("start one (Debian: `sudo bash .ci/setup_podman.sh` then "
              "`export DOCKER_HOST=unix:///run/podman/podman.sock`), or run the suite with `runtime: native`")


class EngineUnreachable(ImageError):
    """No Docker-API engine answered; `reason` says why, without the fix."""

    def __init__(self, reason: str):
        super().__init__(f"{reason}. {ENGINE_FIX[0].upper()}{ENGINE_FIX[1:]}.")
        self.reason = reason


def engine_client(timeout: int = 600):
    """A docker.DockerClient for DOCKER_HOST that has answered a ping, else EngineUnreachable."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except (DockerException, OSError) as exc:
        raise EngineUnreachable(f"no Docker-API engine reachable at DOCKER_HOST={_docker_host()}: {exc}") from exc
    return client


def engine_info(client) -> dict[str, Any]:
    version = client.version()
    return {
        "docker_host": _docker_host(),
        "version": version.get("Version"),
        "api_version": version.get("ApiVersion"),
        "components": [c.get("Name") for c in version.get("Components", [])],
        "os": version.get("Os"),
        "arch": version.get("Arch"),
    }


def context_files(backend: str, root: Path | str = ROOT) -> list[str]:
    """What the build sees: the backend's recipe files, the benchmark source, packaging metadata."""
    root = Path(root)
    files = set(provenance.recipe_files(backend, root)) | set(provenance.source_files(root))
    files |= {aux for aux in _AUX_FILES if (root / aux).is_file()}
    return sorted(files)


def build_context(backend: str, root: Path | str = ROOT) -> bytes:
    """A deterministic tar of exactly `context_files` (fixed owners and times: stable build cache)."""
    root = Path(root)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in context_files(backend, root):
            data = (root / rel).read_bytes()
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = 0o755 if os.access(root / rel, os.X_OK) else 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_ca(env: Mapping[str, str] | None = None, local_dir: Path = LOCAL_CA_DIR) -> tuple[str, dict[str, Any]]:
    """(PEM text, record) of the extra CAs a build's downloads trust, e.g. a TLS-intercepting proxy's.

    They reach the build as the RL_BENCH_BUILD_CA build arg, used only by
    containers/common/with_build_ca.sh for one download step; the image keeps nothing.
    Package integrity does not rest on them: locked packages are checked by hash.
    """
    env = os.environ if env is None else env
    setting = env.get(BUILD_CA_ENV)
    if setting is not None and setting.strip().lower() in ("", "none"):
        return "", {"source": f"{BUILD_CA_ENV}={setting!r}: none", "files": [], "sha256": None}
    if setting is not None:
        paths = [Path(setting)]
        if not paths[0].is_file():
            raise ImageError(f"{BUILD_CA_ENV}={setting}: no such file (a PEM file of CA certificates, or 'none')")
        source = BUILD_CA_ENV
    else:
        paths = sorted(p for p in local_dir.rglob("*.crt") if p.is_file()) if local_dir.is_dir() else []
        source = str(local_dir)
    text = "".join(p.read_text().strip() + "\n" for p in paths)
    if paths and "-----BEGIN CERTIFICATE-----" not in text:
        raise ImageError(f"{', '.join(map(str, paths))}: no PEM certificate found (set {BUILD_CA_ENV}=none to pass none)")
    digest = hashlib.sha256(text.encode()).hexdigest() if text else None
    return text, {"source": source, "files": [str(p) for p in paths], "sha256": digest}


def build_image(
    backend: str,
    root: Path | str = ROOT,
    *,
    base_image: str | None = None,
    build_args: Mapping[str, str] | None = None,
    client=None,
    log: Callable[[str], None] = print,
    network_mode: str | None = None,
    tag: str | None = None,
) -> dict[str, Any]:
    """Build the backend's image from its recipe and return the image record (not yet written).

    base_image overrides the pin (or set RL_BENCH_BASE_IMAGE), e.g. a local
    debootstrap image where no registry is reachable; the override is recorded.
    """
    from docker.errors import APIError, BuildError

    root = Path(root)
    recipe = provenance.recipe_record(backend, root)
    source = provenance.source_record(root)
    pins = provenance.read_pins(backend, root)
    base = base_image or os.environ.get("RL_BENCH_BASE_IMAGE") or pins.get("RL_BENCH_BASE_IMAGE")
    if not base:
        raise ImageError(f"no base image: set RL_BENCH_BASE_IMAGE in containers/{backend}/pins.env")
    ca_text, ca_record = build_ca()
    # RL_BENCH_BACKEND selects the backend in a recipe shared by several (provenance.recipe_dockerfile).
    args = {"BASE_IMAGE": base, "RL_BENCH_BACKEND": backend, "RL_BENCH_RECIPE_SHA256": recipe["sha256"],
            "RL_BENCH_SOURCE_SHA256": source["sha256"], "RL_BENCH_BUILD_CA": ca_text}
    args.update(build_args or {})
    client = client or engine_client()
    tag = tag or image_tag(backend)
    labels = {f"rl-bench.pin.{k.lower()}": v for k, v in pins.items() if k.endswith(("_COMMIT", "_REPO"))}
    started = time.monotonic()
    dockerfile = provenance.recipe_dockerfile(backend, root)
    log(f"building {tag} from {dockerfile} on {_docker_host()} (base {base}, recipe {recipe['sha256']})")
    image_id = None
    tail: collections.deque[str] = collections.deque(maxlen=15)
    try:
        stream = client.api.build(
            fileobj=io.BytesIO(build_context(backend, root)), custom_context=True,
            dockerfile=dockerfile, tag=tag, buildargs=args, labels=labels,
            rm=True, forcerm=True, pull=False, decode=True, network_mode=network_mode,
        )
        for chunk in stream:
            if "error" in chunk:
                raise ImageError(f"build of {tag} failed: {chunk['error'].strip()}; last build output:\n" + "\n".join(tail))
            if chunk.get("stream"):
                line = chunk["stream"].rstrip("\n")
                tail.append(line)
                log(line)
            aux = chunk.get("aux") or {}
            image_id = aux.get("ID", image_id)
    except (APIError, BuildError) as exc:
        raise ImageError(f"build of {tag} failed: {exc}") from exc
    image = client.images.get(tag)
    seconds = time.monotonic() - started
    labels_now = image.labels or {}
    if labels_now.get(LABEL_RECIPE) != recipe["sha256"] or labels_now.get(LABEL_SOURCE) != source["sha256"]:
        raise ImageError(f"built {tag} ({image.id}) lacks the recipe/source labels its recipe must set: {labels_now}")
    digests = image.attrs.get("RepoDigests") or []
    return {
        "schema": IMAGE_SCHEMA,
        "backend": backend,
        "tag": tag,
        "image_id": image.id,
        # A registry digest exists only once someone pushes the image with their own
        # tooling; the benchmark never publishes. Engines may list local digests.
        "digest": None,
        "published": False,
        "local_repo_digests": digests,
        "labels": dict(sorted(labels_now.items())),
        "recipe_sha256": recipe["sha256"],
        "recipe_files": recipe["files"],
        "source_sha256": source["sha256"],
        "build_args": {k: v for k, v in args.items() if not k.startswith("RL_BENCH_")},
        "build_ca": ca_record,
        "base_image": base,
        "base_image_overridden": base != pins.get("RL_BENCH_BASE_IMAGE"),
        "engine": engine_info(client),
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "build_seconds": round(seconds, 3),
    }


def load_image_record(path: Path | str, backend: str | None = None) -> dict[str, Any]:
    path = Path(path)
    hint = f"Next: `uv run snakemake --cores 1 {path}` or `bench build --backend {backend or 'BACKEND'}`"
    if not path.exists():
        raise PreflightError(f"no image record {path}: the {backend or ''} image was never built. {hint}")
    return read_record(path, "image", "image record", PreflightError, hint=hint)


def preflight(
    backend: str,
    root: Path | str = ROOT,
    *,
    record: Mapping[str, Any] | Path | str | None = None,
    client=None,
    verify_contents: bool = True,
    require_dependencies: bool = True,
) -> dict[str, Any]:
    """Refuse a missing or stale image before any GPU is reserved; return what was checked.

    Compares the image's baked recipe and source sha256 (labels) with the controller's
    current files; with verify_contents the hashes are also recomputed inside the
    image from the files it holds. Every failure names both hashes and the fix.
    """
    from docker.errors import ContainerError, DockerException, ImageNotFound

    root = Path(root)
    if record is None or isinstance(record, (str, Path)):
        record = load_image_record(record or record_path(backend, root), backend)
    rebuild = f"Next: rebuild with `bench build --backend {backend}` (or `uv run snakemake --cores 1 {paths.image_record(backend)}`)."
    want_recipe = provenance.recipe_record(backend, root)
    want_source = provenance.source_record(root)
    client = client or engine_client()
    try:
        image = client.images.get(record["image_id"])
    except ImageNotFound as exc:
        raise PreflightError(f"image {record['image_id']} ({record.get('tag')}) recorded for {backend} is not in the engine at {_docker_host()}. {rebuild}") from exc
    labels = image.labels or {}
    baked_recipe, baked_source = labels.get(LABEL_RECIPE), labels.get(LABEL_SOURCE)
    if labels.get(LABEL_BACKEND) != backend:
        raise PreflightError(f"image {image.id} is labelled for backend {labels.get(LABEL_BACKEND)!r}, not {backend!r}. {rebuild}")
    if not baked_recipe or not baked_source:
        raise PreflightError(
            f"image {image.id} carries no recipe identity (recipe label {baked_recipe!r}, source label {baked_source!r}); "
            f"controller recipe sha256 {want_recipe['sha256']}, source sha256 {want_source['sha256']}. {rebuild}"
        )
    problems = []
    if baked_recipe != want_recipe["sha256"]:
        changed = provenance.changed_files(record.get("recipe_files") or {}, want_recipe["files"]) if baked_recipe == record.get("recipe_sha256") else []
        problems.append(
            f"stale recipe: image {image.id} was built from recipe sha256 {baked_recipe}, the controller's is {want_recipe['sha256']}"
            + (f" (changed: {', '.join(changed)})" if changed else "")
        )
    if baked_source != want_source["sha256"]:
        problems.append(f"stale benchmark source: image has source sha256 {baked_source}, the controller's is {want_source['sha256']}")
    if problems:
        raise PreflightError(f"preflight for {backend} failed: " + "; ".join(problems) + f". {rebuild}")
    if require_dependencies and labels.get(LABEL_DEPENDENCIES) != "1":
        raise PreflightError(
            f"image {image.id} is a provenance-only build without dependencies ({LABEL_DEPENDENCIES}={labels.get(LABEL_DEPENDENCIES)!r}); "
            f"it cannot run a benchmark. {rebuild}"
        )
    checked: dict[str, Any] = {
        "backend": backend, "image_id": image.id, "tag": record.get("tag"), "digest": record.get("digest"),
        "recipe_sha256": baked_recipe, "source_sha256": baked_source, "contents_verified": False,
    }
    if verify_contents:
        cmd = ["python3", "-m", "rl_pipeline_bench.provenance", "check", "--root", "/opt/rl-bench", "--backend", backend,
               "--recipe-sha256", want_recipe["sha256"], "--source-sha256", want_source["sha256"]]
        try:
            out = client.containers.run(image.id, cmd, remove=True, network_disabled=True,
                                        environment={"PYTHONPATH": "/opt/rl-bench/src"}, stdout=True, stderr=True)
        except ContainerError as exc:
            err = exc.stderr.decode(errors="replace").strip() if exc.stderr else str(exc)
            raise PreflightError(f"preflight for {backend}: the files inside image {image.id} do not match the controller: {err}. {rebuild}") from exc
        except DockerException as exc:
            raise ImageError(f"preflight for {backend}: could not run image {image.id} to verify its contents: {exc}") from exc
        checked["contents_verified"] = True
        checked["in_image"] = out.decode(errors="replace").strip()
    checked["checked_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return checked


def container_identity(backend: str, root: Path | str = ROOT, **preflight_kwargs) -> dict[str, Any]:
    """Provenance for a container run's manifest: the preflighted image and its proven hashes."""
    checked = preflight(backend, root, **preflight_kwargs)
    return {
        "runtime": "container",
        "image": {k: checked.get(k) for k in ("image_id", "tag", "digest")},
        "recipe_sha256": checked["recipe_sha256"],
        "recipe_proof": "image labels" + (" + in-image recomputation" if checked["contents_verified"] else ""),
        "source_sha256": checked["source_sha256"],
        "preflight": checked,
    }
