"""The objects the controller asks Kubernetes for, as plain dicts with API field names.

One pod runs the benchmark from the image pinned by digest. Mounted into it are only
data (the PVC's run directory, for results), the cache (the PVC's HF_HOME) and
provenance (a ConfigMap holding the source record), plus the pod's own metadata
(downward API: the release gate) and a memory-backed /dev/shm scratch; the
benchmark code and its dependencies are the image's own and are never replaced.
"""

from __future__ import annotations

import json
from typing import Any

from .request import QualifyRequest

#: Where the backend images bake the benchmark (containers/*/Dockerfile: WORKDIR, RL_BENCH_ROOT).
BENCH_ROOT = "/opt/rl-bench"
DATA_DIR = "/rl-bench/data"
CACHE_DIR = "/rl-bench/cache"
PROVENANCE_DIR = "/rl-bench/provenance"
PODINFO_DIR = "/rl-bench/podinfo"
SOURCE_RECORD_FILE = "source.json"
CONTAINER = "benchmark"
RUNS_SUBPATH = "rl-bench-runs"  # results of pod NAME live under PVC:/rl-bench-runs/NAME

RELEASE_ANNOTATION = "rl-bench/release"  # value: the pod UID (go) or "abort"
COLLECTED_ANNOTATION = "rl-bench/collected"  # value: the pod UID once artifacts are safe
ABORT = "abort"


def configmap_name(req: QualifyRequest) -> str:
    return f"{req.name}-provenance"


def collector_name(req: QualifyRequest) -> str:
    return f"{req.name}-collect"


def labels(req: QualifyRequest, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "rl-bench",
        "app.kubernetes.io/component": component,
        "rl-bench/backend": req.backend,
        "rl-bench/invocation": req.invocation,
    }


def data_subpath(req: QualifyRequest) -> str:
    return f"{RUNS_SUBPATH}/{req.name}"


def configmap_manifest(req: QualifyRequest) -> dict[str, Any]:
    """The mounted source record: the hashes the image's baked files must reproduce."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": configmap_name(req), "namespace": req.namespace, "labels": labels(req, "provenance")},
        "data": {SOURCE_RECORD_FILE: json.dumps(req.source_record, indent=2, sort_keys=True) + "\n"},
        "immutable": True,
    }


def pod_command(req: QualifyRequest) -> list[str]:
    cmd = [
        "python", "-m", "rl_pipeline_bench.k8s.pod",
        "--backend", req.backend, "--suite", req.suite,
        "--gpus", ",".join(str(i) for i in range(req.gpus)),
        "--source-record", f"{PROVENANCE_DIR}/{SOURCE_RECORD_FILE}",
        "--data", DATA_DIR, "--cache", CACHE_DIR, "--podinfo", PODINFO_DIR,
    ]
    for hook in req.host_hooks:
        cmd += ["--host-hook", hook]
    return cmd


def _pvc_volume(req: QualifyRequest) -> dict[str, Any]:
    return {"name": "pvc", "persistentVolumeClaim": {"claimName": req.pvc}}


def _placement(req: QualifyRequest, spec: dict[str, Any], node_name: str | None = None) -> dict[str, Any]:
    if req.pull_secret:
        spec["imagePullSecrets"] = [{"name": req.pull_secret}]
    if node_name:  # bound to a node already: no scheduler decision left
        spec["nodeName"] = node_name
        return spec
    if req.scheduler:
        spec["schedulerName"] = req.scheduler
    if req.node_selector:
        spec["nodeSelector"] = dict(req.node_selector)
    if req.runtime_class:
        spec["runtimeClassName"] = req.runtime_class
    return spec


def pod_manifest(req: QualifyRequest) -> dict[str, Any]:
    """The benchmark pod: restartPolicy Never (a failure is never retried by Kubernetes either)."""
    env = [
        {"name": "HF_HOME", "value": CACHE_DIR},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "RL_BENCH_REQUESTED_IMAGE", "value": req.image.reference},
        {"name": "RL_BENCH_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "RL_BENCH_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "RL_BENCH_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": req.image.reference,
        "imagePullPolicy": "IfNotPresent",  # a digest names one manifest; pulling again cannot change it
        "command": pod_command(req),
        "workingDir": BENCH_ROOT,
        "env": env,
        "volumeMounts": [
            {"name": "pvc", "mountPath": DATA_DIR, "subPath": data_subpath(req)},
            {"name": "pvc", "mountPath": CACHE_DIR, "subPath": req.cache_subpath},
            {"name": "provenance", "mountPath": PROVENANCE_DIR, "readOnly": True},
            {"name": "podinfo", "mountPath": PODINFO_DIR, "readOnly": True},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
    }
    if req.gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(req.gpus)}}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [container],
        "volumes": [
            _pvc_volume(req),
            {"name": "provenance", "configMap": {"name": configmap_name(req)}},
            {"name": "podinfo", "downwardAPI": {"items": [
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
            ]}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": req.name,
            "namespace": req.namespace,
            "labels": labels(req, "qualification"),
            "annotations": {
                "rl-bench/requested-image": req.image.reference,
                "rl-bench/source-sha256": req.source_record["source_sha256"],
                "rl-bench/recipe-sha256": req.source_record["recipe_sha256"][req.backend],
            },
        },
        "spec": _placement(req, spec),
    }


def collector_manifest(req: QualifyRequest, node_name: str | None) -> dict[str, Any]:
    """Fallback reader of the results when the benchmark pod exited before collection.

    Same image (already on that node), the run directory read-only, pinned to the
    benchmark pod's node so a ReadWriteOnce volume can attach; no GPUs.
    """
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [{
            "name": "collect",
            "image": req.image.reference,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python", "-c", "import time; time.sleep(3600)"],
            "volumeMounts": [{"name": "pvc", "mountPath": DATA_DIR, "subPath": data_subpath(req), "readOnly": True}],
        }],
        "volumes": [_pvc_volume(req)],
    }
    _placement(req, spec, node_name)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": collector_name(req), "namespace": req.namespace, "labels": labels(req, "collector")},
        "spec": spec,
    }
