"""Command line of scripts/qualify_kubernetes.py (the seed's flags, plus --suite and timeouts)."""

from __future__ import annotations

import argparse
import sys

import yaml

from ..backends import registered
from . import manifests
from .api import ClusterError
from .controller import Controller, ResumeRefused, Timeouts
from .request import RequestError, build_request

EXIT_BAD_INPUT = 2

EPILOG = """\
Make the source record from the unchanged checkout the image was built from:
  uv run python -c 'import json; from rl_pipeline_bench.cli import ROOT, recipe_manifest, source_manifest; \\
    print(json.dumps(dict(source_sha256=source_manifest(), recipe_sha256=recipe_manifest(ROOT))))' > source.json
Exit codes: 0 completed; 1 failed (never rerun); 2 bad input (nothing created); 3 refused: the pod's UID,
imageID or baked hashes did not match, the benchmark was not released."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qualify_kubernetes.py", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run one backend's suite in one Kubernetes pod from an image pinned by digest; "
                    "verify the pod before and after, collect its artifacts, never rerun.")
    p.add_argument("--backend", help="a registered backend of --suite")
    p.add_argument("--suite", default="comparison", help="suite whose workloads and GPU count the pod runs (default: %(default)s)")
    p.add_argument("--name", help="pod name, unique per invocation (RFC 1123 label)")
    p.add_argument("--image", help="REGISTRY/IMAGE@sha256:DIGEST (a digest is required)")
    p.add_argument("--source-provenance", metavar="SOURCE_JSON", help="source record made from the checkout the image was built from")
    p.add_argument("--output", required=True, help="fresh local directory for the record and artifacts (with --resume: the saved one)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument("--namespace", default="default", help="existing namespace (default: %(default)s)")
    p.add_argument("--pvc", help="existing writable PersistentVolumeClaim in --namespace")
    p.add_argument("--cache-subpath", help="HF_HOME (with hub/ inside) relative to the PVC root")
    p.add_argument("--pull-secret", help="imagePullSecret name when the registry needs authentication")
    p.add_argument("--scheduler", help="schedulerName for the pod")
    p.add_argument("--node-selector", action="append", default=[], metavar="KEY=VALUE", help="node selector label (repeatable)")
    p.add_argument("--runtime-class", help="runtimeClassName (e.g. nvidia)")
    p.add_argument("--host-hook", action="append", default=[], metavar="NAME",
                   help="a host-environment change the backend declares for some hosts (repeatable): "
                        + ("; ".join(f"{name} ({b.name}: {hook.summary})" for b in registered()
                                      for name, hook in b.host_hooks.items()) or "none declared"))
    p.add_argument("--dry-run", action="store_true", help="print the requested pod (and its ConfigMap) and exit; nothing is created")
    p.add_argument("--resume", action="store_true", help="observe the pod saved in --output again; never reruns workloads")
    p.add_argument("--start-timeout", type=_seconds, default=Timeouts.start_s, metavar="S", help="scheduling + pull + identity (default %(default)g)")
    p.add_argument("--run-timeout", type=_seconds, default=Timeouts.run_s, metavar="S", help="all workloads (default %(default)g)")
    p.add_argument("--poll", type=_seconds, default=Timeouts.poll_s, metavar="S", help=argparse.SUPPRESS)
    return p


def _seconds(text: str) -> float:
    """A time limit: a finite number of seconds above zero (argparse names the flag on refusal)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number of seconds above 0")
    return value


def _api(context, namespace):
    from .api import ClusterApi

    return ClusterApi(context, namespace)


def main(argv: list[str] | None = None, api_factory=None) -> int:
    args = build_parser().parse_args(argv)
    timeouts = Timeouts(start_s=args.start_timeout, run_s=args.run_timeout, poll_s=args.poll)
    make_api = api_factory or (lambda req: _api(req.context, req.namespace))
    try:
        if args.resume:
            return Controller.resume(make_api, args.output, timeouts)
        missing = [f"--{k.replace('_', '-')}" for k in ("backend", "name", "image", "source_provenance") if not getattr(args, k)]
        if missing:
            raise RequestError(f"missing {', '.join(missing)} (needed for a fresh invocation; --resume needs only --output)")
        req = build_request(args)
        if args.dry_run:
            yaml.safe_dump_all([manifests.configmap_manifest(req), manifests.pod_manifest(req)], sys.stdout, sort_keys=False)
            print(f"# dry run: nothing was created; the pod would run {len(req.workloads)} workloads of suite "
                  f"{req.suite} for {req.backend} on {req.gpus} GPU(s)", file=sys.stderr)
            return 0
        return Controller(req, make_api(req), req.output, timeouts).start()
    except (RequestError, ResumeRefused) as exc:
        print(f"qualify_kubernetes: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ClusterError as exc:  # no kubeconfig/context, API unreachable: nothing more can be observed
        print(f"qualify_kubernetes: cluster: {exc}", file=sys.stderr)
        return 1
