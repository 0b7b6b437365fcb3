"""What runs inside the qualification pod: `python -m rl_pipeline_bench.k8s.pod ...`.

1. identity: recompute the recipe and source sha256 from the files baked into the
   image (RL_ROOT, /opt/rl-bench in the backend images) and compare them with the mounted source record; check the HF cache and
   the framework topology. Any problem exits here, before any GPU work.
2. gate: wait until the controller, having checked this pod's UID and actual
   imageID, sets the annotation rl-bench/release to this pod's UID ("abort": exit).
3. runs: every workload of the suite, serially, each under the lease supervisor
   (locks inside the pod), stopping at the first failure; then summaries.
4. hold: report completion and wait until the controller has collected the
   results (annotation rl-bench/collected = UID), so it can read them through the
   API; then exit with the outcome. Nothing is ever re-run.
Every step is reported on stdout as a marker line (markers.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..provenance import recipes as provenance
from ..records.atomicfile import write_json_atomic
from . import markers
from ..paths import ROOT
from .manifests import ABORT, COLLECTED_ANNOTATION, RELEASE_ANNOTATION

EXIT_IDENTITY = 3  # baked hashes, cache or topology do not match: refused before GPU work
EXIT_ABORTED = 4  # the controller refused the pod (UID or imageID) or never released it
EXIT_RUN_FAILED = 1


def check_identity(root: Path, backend: str, record_path: Path, cache: Path, needs_hub: bool) -> dict[str, Any]:
    """Baked recipe/source sha256 (recomputed from the image's files) against the mounted record."""
    problems: list[str] = []
    try:
        mounted = json.loads(Path(record_path).read_text())
    except (OSError, ValueError) as exc:
        mounted = {}
        problems.append(f"cannot read the mounted source record {record_path}: {exc}")
    baked = {"source_sha256": None, "recipe_sha256": None}
    try:
        baked["source_sha256"] = provenance.source_manifest(root)
        baked["recipe_sha256"] = provenance.recipe_record(backend, root)["sha256"]
    except provenance.ProvenanceError as exc:
        problems.append(f"the image's baked files under {root} cannot be hashed: {exc}")
    want_source = mounted.get("source_sha256")
    want_recipe = (mounted.get("recipe_sha256") or {}).get(backend)
    if baked["source_sha256"] and baked["source_sha256"] != want_source:
        problems.append(f"baked source sha256 {baked['source_sha256']} differs from the mounted record's {want_source}")
    if baked["recipe_sha256"] and baked["recipe_sha256"] != want_recipe:
        problems.append(f"baked {backend} recipe sha256 {baked['recipe_sha256']} differs from the mounted record's {want_recipe}")
    if needs_hub and not (Path(cache) / "hub").is_dir():
        problems.append(f"the cache {cache} has no hub/ directory: --cache-subpath must name an HF_HOME (the directory that contains hub/)")
    return {"ok": not problems, "problems": problems, "baked": baked,
            "mounted": {"source_sha256": want_source, "recipe_sha256": want_recipe}}


def read_annotations(podinfo: Path) -> dict[str, str]:
    """The downward-API annotations file: one `key="value"` per line (Go-quoted values)."""
    try:
        text = (Path(podinfo) / "annotations").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if not eq:
            continue
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value.strip('"')
    return out


def wait_for_annotation(podinfo: Path, key: str, uid: str, timeout_s: float, poll_s: float = 2.0) -> str:
    """'go' once annotation `key` equals this pod's UID, 'abort' on "abort", 'timeout' otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read_annotations(podinfo).get(key)
        if value == uid:
            return "go"
        if value == ABORT:
            return "abort"
        if time.monotonic() >= deadline:
            return "timeout"
        time.sleep(poll_s)


def model_record(config: dict[str, Any], model: str, cache: Path) -> dict[str, Any]:
    """The model identity from the mounted HF cache: hub models offline (never fetched), local ones built."""
    from ..models.snapshots import hub_identity, model_rule_params

    p = model_rule_params(config, model)
    if p["source"] == "hub":
        return hub_identity(model, p["repo_id"], p["revision"], cache, offline=True)
    from ..models.reference import build_reference_snapshot

    return build_reference_snapshot(Path(ROOT) / p["build_config"], cache, model=model, repo_id=p["repo_id"])


def run_workloads(args, config: dict[str, Any], suite, data: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """Every workload serially under the in-pod lease; stops at the first failure."""
    from ..leases import lease_command

    model = model_record(config, suite["model"], Path(args.cache))
    model_path = write_json_atomic(model, data / "models" / f"{suite['model']}.json")
    source_path = write_json_atomic(provenance.source_record(ROOT), data / "provenance" / "source.json")
    recipe_path = write_json_atomic(provenance.recipe_record(args.backend, ROOT),
                                    data / "provenance" / "recipes" / f"{args.backend}.json")
    results = []
    for workload in suite["workloads"]:
        run_dir = data / "runs" / suite.name / args.backend / workload / "trial1"
        run_json = run_dir / "run.json"
        bench = [sys.executable, "-m", "rl_pipeline_bench.cli"]
        command = [*bench, "run", "--suite", suite.name, "--backend", args.backend, "--workload", workload,
                   "--trial", "1", "--config", f"hf_cache={args.cache}", "--model-record", str(model_path),
                   "--recipe-record", str(recipe_path), "--source-record", str(source_path),
                   "--evidence-root", str(data / "evidence"), "--run-json", str(run_json)]
        if suite["gpus"]:
            run_id = f"{suite.name}-{args.backend}-{workload}-trial1"
            command = lease_command(args.gpus, suite["gpus"], run_id, launcher=(*bench, "lease")) + command
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(run_dir / "pod-run.log", "w") as log:
            code = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        summary = None
        if code == 0:
            subprocess.run([*bench, "summarize-run", str(run_json), "--output", str(run_dir / "summary.json")],
                           env=env, check=False)
            if (run_dir / "summary.json").exists():
                s = json.loads((run_dir / "summary.json").read_text())
                summary = {"valid": s.get("valid"), "reasons": s.get("reasons")}
        record = markers.emit("run", workload=workload, exit_code=code, run_json=str(run_json.relative_to(data)),
                              summary=summary)
        results.append(record)
        if code != 0:
            break
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl_pipeline_bench.k8s.pod", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--suite", required=True)
    parser.add_argument("--gpus", required=True, help="in-pod GPU SPEC (the pod sees only its own GPUs)")
    parser.add_argument("--source-record", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--podinfo", type=Path, required=True)
    parser.add_argument("--host-hook", action="append", default=[], metavar="NAME")
    parser.add_argument("--release-timeout", type=float, default=3600.0)
    parser.add_argument("--collect-timeout", type=float, default=6 * 3600.0)
    args = parser.parse_args(argv)
    uid = os.environ.get("RL_BENCH_POD_UID", "")

    from .. import backends
    from ..settings.config import load_config
    from ..records.configfile import ConfigError, get_suite
    from ..settings.spec import build_spec, check_spec
    from ..backends.topology import preflight as topology_preflight

    env = dict(os.environ, HF_HOME=str(args.cache), HF_HUB_OFFLINE="1", RL_BENCH_ROOT=str(ROOT))
    problems: list[str] = []
    needs_hub = True
    try:
        config = load_config(Path(ROOT) / "config.yaml", {"hf_cache": str(args.cache)})
        suite = get_suite(config, args.suite)
        needs_hub = config["models"][suite["model"]]["source"] == "hub"  # a local model brings its own hub/
        topology_preflight(check_spec(build_spec(config, suite.name)), args.backend)
        hooks = backends.get(args.backend).host_hooks
        for name in args.host_hook:  # the request checked the names against the same descriptor
            env = hooks[name].apply(env, provenance.read_pins(args.backend, ROOT))
    except (ConfigError, RuntimeError, OSError) as exc:
        problems.append(str(exc))
    identity = check_identity(Path(ROOT), args.backend, args.source_record, args.cache, needs_hub)
    identity["problems"] = problems + identity["problems"]
    identity["ok"] = not identity["problems"]
    markers.emit("identity", uid=uid, **identity)
    if not identity["ok"]:
        return EXIT_IDENTITY
    gate = wait_for_annotation(args.podinfo, RELEASE_ANNOTATION, uid, args.release_timeout)
    if gate != "go":
        markers.emit("released", uid=uid, released=False, reason=gate)
        return EXIT_ABORTED
    markers.emit("released", uid=uid, released=True)
    results = run_workloads(args, config, suite, args.data, env)
    ok = len(results) == len(suite["workloads"]) and all(r["exit_code"] == 0 for r in results)
    markers.emit("completed", uid=uid, ok=ok, runs=len(results), data=str(args.data))
    wait_for_annotation(args.podinfo, COLLECTED_ANNOTATION, uid, args.collect_timeout)
    return 0 if ok else EXIT_RUN_FAILED


if __name__ == "__main__":
    sys.exit(main())
