"""Recipe and source identities: sha256 over the exact files that define what ran.

A result is only traceable if we can say which recipe built its environment and which
benchmark code drove it. A backend's recipe is its folder `containers/<name>/`
(Dockerfile, native setup script, env wrapper, pins), the shared `containers/common/`,
its driver package and the repository files its pins name (`RL_BENCH_RECIPE_FILES`);
the recipe hash covers exactly those files. The source hash covers the benchmark's
Python and workflow files. Both are order-independent digests
of `sha256sum`-style lines, so `sha256sum` can check any single file by hand.

Standard library only: the same module runs inside images to recompute what was baked.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from .. import backends
from ..records.atomicfile import write_json_atomic
from ..paths import ROOT
from ..records.formats import schema_of
from ..records.jsonfile import read_record

RECIPE_SCHEMA = schema_of("recipe")
SOURCE_SCHEMA = schema_of("source")

# Caches and editor droppings never change what runs; ignoring them keeps hashes stable.
_IGNORED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".snakemake", ".ipynb_checkpoints"}
_IGNORED_SUFFIXES = (".pyc", ".pyo", "~", ".swp", ".orig", ".rej")
_IGNORED_NAMES = {".DS_Store"}

#: A backend's recipe folder; one folder is one recipe.
RECIPE_DIR = "containers/{b}"
#: Files every recipe folder must hold (the recipe is incomplete without them); its own
#: `Dockerfile` too, unless its pins name a shared one (DOCKERFILE_PIN).
RECIPE_REQUIRED = ("setup.sh", "env.sh", "pins.env")
#: Pins key naming the image recipe a backend builds from when it is shared with other
#: backends (a repository path; built with the build argument RL_BENCH_BACKEND=<backend>).
DOCKERFILE_PIN = "RL_BENCH_DOCKERFILE"
# Hashed with the recipe when present: the rest of its folder, the shared container
# helpers and the backend's driver package.
_RECIPE_OPTIONAL = (
    "containers/{b}/**/*",
    "containers/common/**/*",
    "src/rl_pipeline_bench/backends/{b}/**/*",
)
#: Pins key naming repository files outside the folder that the recipe builds from
#: (space-separated; the reference environment is the project's own pyproject.toml + uv.lock).
RECIPE_FILES_PIN = "RL_BENCH_RECIPE_FILES"
# The benchmark's own code and workflow. config.yaml, model build configs and
# profiles are inputs recorded elsewhere (manifest, model identity), not source.
SOURCE_PATTERNS = (
    "src/rl_pipeline_bench/**/*",
    "workflow_scripts/**/*",
    "rules/**/*",
    "Snakefile",
    "schemas/**/*",
    # local models' build configs: a spec names one by path and hash (checked again inside an image)
    "models/**/*",
    "pyproject.toml",
)


class ProvenanceError(RuntimeError):
    """A recipe or source file set is incomplete; the message names what is missing."""


def _ignored(rel: Path) -> bool:
    if any(part in _IGNORED_DIRS for part in rel.parts[:-1]):
        return True
    return rel.name in _IGNORED_NAMES or rel.name.endswith(_IGNORED_SUFFIXES)


def expand(root: Path | str, patterns: Iterable[str]) -> list[str]:
    """Files (relative POSIX paths, sorted) matching glob patterns under root, caches excluded."""
    root = Path(root)
    found: set[str] = set()
    for pattern in patterns:
        for path in root.glob(pattern):
            if path.is_file():
                rel = path.relative_to(root)
                if not _ignored(rel):
                    found.add(rel.as_posix())
    return sorted(found)


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def hash_files(root: Path | str, relpaths: Iterable[str]) -> tuple[str, dict[str, str]]:
    """(combined sha256, {relpath: sha256}); the combined digest is independent of input order."""
    root = Path(root)
    files = {rel: file_sha256(root / rel) for rel in sorted(set(relpaths))}
    lines = "".join(f"{digest}  {rel}\n" for rel, digest in files.items())
    return hashlib.sha256(lines.encode()).hexdigest(), files


def check_backend(backend: str, root: Path | str = ROOT) -> str:
    """`backend` if it is registered in the tree at root (a package under its backends/)."""
    known = backends.names(root)
    if backend not in known:
        raise ProvenanceError(f"unknown backend '{backend}' (registered backends: {', '.join(known)})")
    return backend


def recipe_dockerfile(backend: str, root: Path | str = ROOT) -> str:
    """The image recipe the backend builds from: its pins' shared one, else its folder's Dockerfile."""
    folder = RECIPE_DIR.format(b=backend)
    pins = read_pins(backend, root) if (Path(root) / folder / "pins.env").is_file() else {}
    return pins.get(DOCKERFILE_PIN) or f"{folder}/Dockerfile"


def recipe_files(backend: str, root: Path | str = ROOT) -> list[str]:
    """The backend's recipe files; raises naming any required file that is missing."""
    check_backend(backend, root)
    root = Path(root)
    folder = RECIPE_DIR.format(b=backend)
    required = [f"{folder}/{name}" for name in RECIPE_REQUIRED] + [recipe_dockerfile(backend, root)]
    if (root / folder / "pins.env").is_file():
        required += read_pins(backend, root).get(RECIPE_FILES_PIN, "").split()
    missing = [rel for rel in required if not (root / rel).is_file()]
    if missing:
        raise ProvenanceError(f"recipe for backend '{backend}' under {root} is incomplete: missing {', '.join(missing)}")
    optional = expand(root, [p.format(b=backend) for p in _RECIPE_OPTIONAL])
    return sorted(set(required) | set(optional))


def recipe_record(backend: str, root: Path | str = ROOT) -> dict[str, Any]:
    """results/provenance/recipes/{backend}.json: the recipe hash and the file list it covers."""
    digest, files = hash_files(root, recipe_files(backend, root))
    return {"schema": RECIPE_SCHEMA, "backend": backend, "sha256": digest, "files": files}


def recipe_manifest(root: Path | str = ROOT) -> dict[str, str]:
    """{backend: recipe sha256} for every registered backend (the seed's Kubernetes source record uses this)."""
    return {b: recipe_record(b, root)["sha256"] for b in backends.names(root)}


def source_files(root: Path | str = ROOT) -> list[str]:
    files = expand(root, SOURCE_PATTERNS)
    if not any(f.startswith("src/rl_pipeline_bench/") for f in files):
        raise ProvenanceError(f"no benchmark source under {Path(root) / 'src/rl_pipeline_bench'}")
    return files


def source_record(root: Path | str = ROOT) -> dict[str, Any]:
    """results/provenance/source.json: the benchmark source hash and the file list it covers."""
    digest, files = hash_files(root, source_files(root))
    return {"schema": SOURCE_SCHEMA, "sha256": digest, "files": files}


def source_manifest(root: Path | str = ROOT) -> str:
    """The benchmark source sha256 (the value images bake and preflight compares)."""
    return source_record(root)["sha256"]


def changed_files(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Relative paths added, removed or altered between two {relpath: sha256} maps."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


# --- pinned environments (containers/{backend}/pins.env) ------------------------------

def read_pins(backend: str, root: Path | str = ROOT) -> dict[str, str]:
    """KEY=VALUE pins of a backend's environment; the same file the shell recipes source."""
    import shlex

    path = Path(root) / RECIPE_DIR.format(b=check_backend(backend, root)) / "pins.env"
    if not path.is_file():
        raise ProvenanceError(f"no pins file {path}: every backend's environment is pinned in containers/{backend}/pins.env")
    pins: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier():
            raise ProvenanceError(f"{path}:{n}: expected KEY=VALUE, got {line!r}")
        words = shlex.split(value, comments=True)
        pins[key] = " ".join(words)
    return pins


# --- native environments: setup manifests ---------------------------------------------

SETUP_SCHEMA = schema_of("setup")


def _utc_now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def installed_distributions() -> dict[str, str]:
    """{distribution name: version} of the running interpreter (run with the prefix's Python)."""
    from importlib import metadata

    out: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out[name] = dist.version
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def setup_manifest(backend: str, prefix: Path | str, root: Path | str = ROOT, *, started_at: str | None = None,
                   facts: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What a setup script provisioned: recipe/source identity, pins, interpreter, packages.

    Written by containers/{backend}/setup.sh into PREFIX/setup_manifests/ with the
    prefix's own interpreter, so the package list is what that environment holds.
    """
    import platform
    import sys

    rec = recipe_record(backend, root)
    return {
        "schema": SETUP_SCHEMA,
        "backend": backend,
        "prefix": str(Path(prefix).resolve()),
        "recipe_sha256": rec["sha256"],
        "recipe_files": rec["files"],
        "source_sha256": source_manifest(root),
        "pins": read_pins(backend, root),
        "facts": dict(facts or {}),
        "python": {"executable": sys.executable, "version": platform.python_version()},
        "packages": installed_distributions(),
        "started_at": started_at,
        "finished_at": _utc_now(),
    }


def load_setup_manifests(env_root: Path | str) -> dict[str, Any]:
    """All setup manifests of a native prefix ({file name: content}); a run manifest copies them."""
    folder = Path(env_root) / "setup_manifests"
    if not folder.is_dir():
        raise ProvenanceError(
            f"{env_root} has no setup_manifests/: it was not provisioned by containers/*/setup.sh. "
            "Provision a fresh prefix with `RL_BENCH_ENV_ROOT=/abs/new/prefix bash containers/BACKEND/setup.sh`."
        )
    out = {}
    for path in sorted(folder.glob("*.json")):
        out[path.name] = read_record(path, "setup", "setup manifest", ProvenanceError)
    if not out:
        raise ProvenanceError(f"{folder} holds no setup manifest; the prefix's setup did not finish")
    return out


def native_identity(backend: str, env_root: Path | str | None, root: Path | str = ROOT) -> dict[str, Any]:
    """Provenance of a native run: the controller's recipe hash, labelled as requested, not proven.

    The prefix's setup manifests (when a prefix is used) are copied verbatim: they say
    what setup ran, which live source cannot.
    """
    ident: dict[str, Any] = {
        "runtime": "native",
        "requested_recipe_sha256": recipe_record(backend, root)["sha256"],
        "recipe_proof": "requested (native runtime: not proven by an image)",
        "source_sha256": source_manifest(root),
        "env_root": str(env_root) if env_root else None,
        "setup_manifests": load_setup_manifests(env_root) if env_root else {},
    }
    return ident


# --- inside an image: the container's own recomputation --------------------------------

#: Set by the host for a container run: the image's baked (labelled) hashes.
BAKED_RECIPE_ENV = "RL_BENCH_IMAGE_RECIPE_SHA256"
BAKED_SOURCE_ENV = "RL_BENCH_IMAGE_SOURCE_SHA256"


def running_package_check(root: Path | str = ROOT) -> dict[str, Any]:
    """Is the imported rl_pipeline_bench package file for file the hashed tree's src/rl_pipeline_bench?

    In an image the benchmark is installed from the hashed tree; this proves the code
    that runs is that tree (nothing added, removed or replaced since the build).
    """
    import rl_pipeline_bench

    running = Path(rl_pipeline_bench.__file__).resolve().parent
    tree = Path(root) / "src" / "rl_pipeline_bench"
    have = {rel: file_sha256(running / rel) for rel in expand(running, ["**/*"])}
    want = {rel: file_sha256(tree / rel) for rel in expand(tree, ["**/*"])}
    differ = changed_files(want, have)
    return {"package_dir": str(running), "tree": str(tree), "files": len(have), "differing": differ, "matches": not differ}


def in_image_identity(backend: str, root: Path | str = ROOT, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Recompute, inside the image, the recipe and source hashes of its own tree; compare with the baked ones.

    `matches` is true only when both recomputed hashes equal the image's labels (passed
    by the host in RL_BENCH_IMAGE_*_SHA256) and the running package is that tree.
    """
    env = os.environ if env is None else env
    recipe = recipe_record(backend, root)["sha256"]
    source = source_manifest(root)
    baked_recipe, baked_source = env.get(BAKED_RECIPE_ENV), env.get(BAKED_SOURCE_ENV)
    running = running_package_check(root)
    problems = []
    for what, baked, now in (("recipe", baked_recipe, recipe), ("source", baked_source, source)):
        if not baked:
            problems.append(f"no baked {what} sha256 given ({BAKED_RECIPE_ENV if what == 'recipe' else BAKED_SOURCE_ENV})")
        elif baked != now:
            problems.append(f"{what} sha256 recomputed in the container is {now}, the image was baked with {baked}")
    if not running["matches"]:
        problems.append(f"the running package {running['package_dir']} differs from {running['tree']}: "
                        + ", ".join(running["differing"][:10]))
    return {
        "root": str(Path(root)),
        "recipe_sha256": recipe,
        "source_sha256": source,
        "baked_recipe_sha256": baked_recipe,
        "baked_source_sha256": baked_source,
        "running_package": running,
        "matches": not problems,
        "problems": problems,
    }


# --- command line (stdlib only: used by setup scripts and inside images) ---------------

def _main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m rl_pipeline_bench.provenance",
                                     description="Recipe/source identities (no third-party imports).")
    sub = parser.add_subparsers(dest="cmd", required=True)
    show = sub.add_parser("show", help="print {source_sha256, recipe_sha256} for this tree")
    show.add_argument("--root", default=str(ROOT))
    rec = sub.add_parser("recipe", help="write one backend's recipe record")
    rec.add_argument("--root", default=str(ROOT))
    rec.add_argument("--backend", required=True)
    rec.add_argument("--output", required=True)
    src = sub.add_parser("source", help="write the source record")
    src.add_argument("--root", default=str(ROOT))
    src.add_argument("--output", required=True)
    check = sub.add_parser("check", help="fail unless this tree has the expected hashes (used in image builds)")
    check.add_argument("--root", default=str(ROOT))
    check.add_argument("--backend", required=True)
    check.add_argument("--recipe-sha256", default="")
    check.add_argument("--source-sha256", default="")
    setup = sub.add_parser("setup-manifest", help="write PREFIX/setup_manifests/BACKEND.json")
    setup.add_argument("--root", default=str(ROOT))
    setup.add_argument("--backend", required=True)
    setup.add_argument("--prefix", required=True)
    setup.add_argument("--started-at")
    setup.add_argument("--fact", action="append", default=[], metavar="NAME=VALUE", help="a fact of the setup, e.g. uv=... or a framework commit (repeatable)")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "show":
            print(json.dumps({"source_sha256": source_manifest(args.root), "recipe_sha256": recipe_manifest(args.root)}, indent=2))
        elif args.cmd in ("recipe", "source"):
            record = recipe_record(args.backend, args.root) if args.cmd == "recipe" else source_record(args.root)
            write_json_atomic(record, args.output)
            print(f"wrote {args.output}: sha256 {record['sha256']} over {len(record['files'])} files")
        elif args.cmd == "check":
            problems = []
            recipe = recipe_record(args.backend, args.root)["sha256"]
            source = source_manifest(args.root)
            for what, expected, actual in (("recipe", args.recipe_sha256, recipe), ("source", args.source_sha256, source)):
                if not expected:
                    problems.append(f"no expected {what} sha256 given (the {what} identity is missing)")
                elif expected != actual:
                    problems.append(f"{what} sha256 of this tree is {actual}, expected {expected}")
            if problems:
                print("provenance check failed: " + "; ".join(problems), file=sys.stderr)
                return 1
            print(f"provenance check ok: {args.backend} recipe {recipe}, source {source}")
        else:
            facts = dict(f.split("=", 1) for f in args.fact)
            manifest = setup_manifest(args.backend, args.prefix, args.root, started_at=args.started_at, facts=facts)
            path = write_json_atomic(manifest, Path(args.prefix) / "setup_manifests" / f"{args.backend}.json")
            print(f"wrote {path}")
    except ProvenanceError as exc:
        print(f"provenance: {exc}", file=sys.stderr)
        return 2
    return 0

