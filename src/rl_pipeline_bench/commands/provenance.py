"""`bench provenance|build|preflight|snapshot`: identities of what a run executes.

Each subcommand is what a Snakemake rule calls (rules/provenance.smk, containers.smk)
and what a person runs by hand; all failures exit non-zero with a message that names
the file or hash and the next step.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import paths
from ..paths import CONFIG_PATH, ROOT


def _emit(record: dict, output: str | None) -> None:
    from ..records.atomicfile import write_json_atomic

    if output:
        write_json_atomic(record, output)
        print(f"wrote {output}")
    else:
        print(json.dumps(record, indent=2, sort_keys=True))


def _provenance(args: argparse.Namespace) -> int:
    from ..provenance import recipes as provenance

    try:
        if args.what == "recipe":
            if not args.backend:
                print("bench provenance recipe: --backend is required", file=sys.stderr)
                return 2
            record = provenance.recipe_record(args.backend, args.root)
        elif args.what == "source":
            record = provenance.source_record(args.root)
        else:  # the seed's Kubernetes source record
            record = {"source_sha256": provenance.source_manifest(args.root), "recipe_sha256": provenance.recipe_manifest(args.root)}
    except provenance.ProvenanceError as exc:
        print(f"bench provenance: {exc}", file=sys.stderr)
        return 1
    _emit(record, args.output)
    return 0


def _build(args: argparse.Namespace) -> int:
    from ..provenance import images, recipes as provenance

    log_fh = open(args.log, "a") if args.log else None

    def log(line: str) -> None:
        print(line, file=log_fh or sys.stdout, flush=True)

    try:
        record = images.build_image(args.backend, args.root, base_image=args.base_image, log=log, network_mode=args.network)
    except (images.ImageError, provenance.ProvenanceError) as exc:
        if log_fh:  # the build log keeps the failure too; the terminal gets it once, on stderr
            log(f"bench build: {exc}")
        print(f"bench build: {exc}", file=sys.stderr)
        return 1
    finally:
        if log_fh:
            log_fh.close()
    output = args.output or str(images.record_path(args.backend, args.root))
    _emit(record, output)
    return 0


def _preflight(args: argparse.Namespace) -> int:
    """Everything a run must prove before a GPU lease: model snapshot, then image or native prefix."""
    import os

    from ..runs import image_runs
    from ..provenance import images, recipes as provenance
    from ..models import snapshots
    from ..backends.framework.support import SupportError
    from ..backends.suite_checks import preflight as topology_preflight

    if args.spec:  # the workflow: the resolved spec, never config.yaml
        from ..settings.spec import load_spec

        spec = load_spec(args.spec)
        args.runtime = args.runtime or spec.runtime
        result: dict = {"spec": spec.id, "suite": spec.suite_name}
    elif args.suite:
        from ..settings.spec import spec_from_config_file

        from .run import config_overrides

        spec = spec_from_config_file(CONFIG_PATH, args.suite, config_overrides(args), args.configfile)
        result = {"suite": spec.suite_name}
    else:
        spec = None
        result = {}
    if spec is not None:
        topology_preflight(spec, args.backend)  # ConfigError -> exit 2, naming the key
    args.runtime = args.runtime or "container"
    result.update(backend=args.backend, runtime=args.runtime)
    try:
        if args.model_record:
            record = snapshots.load_record(args.model_record)
            snapshots.verify_record(record)
            result["model"] = {k: record[k] for k in ("model", "repo_id", "revision", "snapshot_path")}
            result["model"]["files_verified"] = len(record["files"])
        if args.runtime == "container" and image_runs.in_place():
            # Already in the image (a Kubernetes pod of it): no engine to ask, the image proves itself.
            ident = image_runs.in_container_identity(args.backend, args.root)
            if not ident["in_image"]["matches"]:
                raise images.PreflightError(f"preflight in the {args.backend} image: "
                                            + "; ".join(ident["in_image"]["problems"]))
            result.update(ident)
        elif args.runtime == "container":
            result.update(images.container_identity(
                args.backend, args.root, record=args.record, verify_contents=not args.labels_only,
                require_dependencies=not args.allow_provenance_only))
        else:
            env_root = args.env_root or os.environ.get("RL_BENCH_ENV_ROOT")
            result.update(provenance.native_identity(args.backend, env_root, args.root))
        if spec is not None:
            result.update(_framework_support(args, spec, result))
    except (images.ImageError, provenance.ProvenanceError, snapshots.SnapshotError, SupportError) as exc:
        print(f"bench preflight: {exc}", file=sys.stderr)
        return 1
    _emit(result, args.output)
    return 0


def _framework_support(args: argparse.Namespace, spec, result: dict) -> dict:
    """Ask the framework, in its own environment, whether it can express the contract; refuse on gaps."""
    import os

    from .. import backends
    from ..runs import image_runs
    from ..backends.framework import support as fs

    native_config = backends.get(args.backend).native_support
    if native_config is None:  # a backend without a separate framework (the reference backend)
        return {}
    native = native_config(spec)
    if args.runtime == "container" and not image_runs.in_place():
        from ..provenance import images

        answer = fs.check_in_image(args.backend, native, result["image"]["image_id"], images.engine_client())
    else:
        env_root = args.env_root or os.environ.get("RL_BENCH_ENV_ROOT")
        python = Path(env_root) / args.backend / ".venv" / "bin" / "python" if env_root else Path(sys.executable)
        answer = fs.check_in_python(args.backend, native, python)
    fs.refuse_gaps(args.backend, answer)
    return {"framework_support": {k: answer.get(k) for k in ("framework", "version", "checked_in", "facts")}}


def _snapshot(args: argparse.Namespace) -> int:
    from ..models import snapshots
    from ..settings.config import load_config
    from ..records.configfile import check_member

    from .run import config_overrides

    overrides = config_overrides(args)
    if args.hf_cache:
        overrides["hf_cache"] = args.hf_cache
    config = load_config(CONFIG_PATH, overrides, args.configfile)
    check_member("model", args.model, sorted(config["models"]))
    settings = config["models"][args.model]
    hf_home = snapshots.hf_home_for(config, args.root)
    try:
        if settings["source"] == "hub":
            record = snapshots.hub_identity(args.model, settings["repo_id"], settings["revision"], hf_home,
                                            offline=True if args.offline else None)
        else:
            revision = (snapshots.repo_folder(hf_home, settings["repo_id"]) / "refs" / "main")
            if not revision.is_file():
                raise snapshots.SnapshotError(
                    f"local model {args.model} has not been built into {hf_home}. "
                    f"Next: `uv run snakemake --cores 1 {paths.model_record(args.model)}`"
                )
            record = snapshots.identity_record(args.model, "local", settings["repo_id"], revision.read_text().strip(), hf_home)
    except snapshots.SnapshotError as exc:
        print(f"bench snapshot: {exc}", file=sys.stderr)
        return 1
    _emit(record, args.output)
    return 0


def register(subparsers) -> None:
    from ..backends import names as backend_names
    from .run import add_config_args

    root_kw = dict(type=Path, default=ROOT, help="repository root whose files are hashed (default: this checkout)")

    p = subparsers.add_parser("provenance", help="recipe and source identities (sha256 + file lists)")
    p.add_argument("what", choices=["recipe", "source", "show"], help="recipe: one backend; source: benchmark code; show: all hashes")
    p.add_argument("--backend", choices=backend_names())
    p.add_argument("--root", **root_kw)
    p.add_argument("--output", help="write the record here (atomically) instead of printing it")
    p.set_defaults(func=_provenance)

    b = subparsers.add_parser("build", help="build a backend image on the engine DOCKER_HOST names (never pushed)")
    b.add_argument("--backend", required=True, choices=backend_names())
    b.add_argument("--root", **root_kw)
    b.add_argument("--base-image", help="override the pinned base image (recorded), e.g. a local debootstrap image")
    b.add_argument("--network", help="build network mode (engine default when omitted)")
    b.add_argument("--output", help=f"image record path (default {paths.image_record('BACKEND')})")
    b.add_argument("--log", help="append the build log here instead of printing it")
    b.set_defaults(func=_build)

    f = subparsers.add_parser("preflight", help="before any GPU lease: verify the model snapshot and the image (or native prefix)")
    f.add_argument("--backend", required=True, choices=backend_names())
    f.add_argument("--runtime", choices=["container", "native"], default=None,
                   help="default: the spec's runtime with --spec, else container")
    f.add_argument("--model-record", help=f"{paths.model_record('MODEL')}: re-hash its snapshot")
    f.add_argument("--env-root", help="native prefix (default $RL_BENCH_ENV_ROOT; none: the current environment)")
    f.add_argument("--output", help="write the preflight result here instead of printing it")
    f.add_argument("--spec", help=f"resolved run spec ({paths.spec_file('SUITE-HASH')}): check its topology for this backend")
    f.add_argument("--suite", help="without --spec: check this config suite's topology/model/GPU count (contract)")
    add_config_args(f)
    f.add_argument("--root", **root_kw)
    f.add_argument("--record", help=f"image record (default {paths.image_record('BACKEND')})")
    f.add_argument("--labels-only", action="store_true", help="compare labels only; do not recompute hashes inside the image")
    f.add_argument("--allow-provenance-only", action="store_true", help="accept an image built with --no-dependencies")
    f.set_defaults(func=_preflight)

    s = subparsers.add_parser("snapshot", help="resolve/verify a pinned model snapshot and print its identity record")
    s.add_argument("--model", required=True)
    add_config_args(s)
    s.add_argument("--hf-cache", help=f"HF_HOME containing hub/ (default: config hf_cache or {paths.HF_HOME})")
    s.add_argument("--offline", action="store_true", help="never download; verify an existing snapshot only")
    s.add_argument("--root", **root_kw)
    s.add_argument("--output", help="write the record here (atomically) instead of printing it")
    s.set_defaults(func=_snapshot)
