"""TEST DOUBLE at the one edge this machine cannot reach: a Kubernetes API server, its kubelet
and the program inside the pod, for the controller's state-machine tests.

No kube-apiserver, k3s or kind can run here. `FakeCluster` implements the few calls of
`rl_pipeline_bench.k8s.api.ClusterApi` and answers with API objects in the exact shape
the API server returns for a GPU pod (field names and structure as `kubectl get pod -o
json` prints them; the tests validate every object against the real Kubernetes schema
in strict mode). They are written here, not captured from a live cluster. The pod's
behaviour is scripted: it reports identity through the same marker lines the real
in-pod program prints, waits for the release annotation, reports runs and completion,
and exits once collected. Artifact collection runs the real archive script locally.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import uuid
from io import StringIO
from pathlib import Path

from rl_pipeline_bench.k8s import manifests, markers
from rl_pipeline_bench.k8s.api import ClusterError

T0 = "2026-11-30T09:00:00Z"


def _marker(event: str, **fields) -> str:
    out = StringIO()
    markers.emit(event, out=out, **fields)
    return out.getvalue()


class FakeCluster:
    def __init__(self, results_dir: Path, *, image_digest: str | None = None, identity_ok: bool = True,
                 run_fails: bool = False, replace_after_release: bool = False, node: str = "gpu-node-3"):
        self.results_dir = Path(results_dir)
        self.image_digest = image_digest  # None: the requested one
        self.identity_ok, self.run_fails, self.replace_after_release = identity_ok, run_fails, replace_after_release
        self.node = node
        self.pods: dict[str, dict] = {}
        self.logs: dict[str, str] = {}
        self.calls: list[tuple[str, str]] = []
        self.created_pods: list[str] = []

    # ClusterApi ----------------------------------------------------------
    def create_config_map(self, body: dict) -> dict:
        self.calls.append(("create_config_map", body["metadata"]["name"]))
        return self._server_fields(copy.deepcopy(body))

    def create_pod(self, body: dict) -> dict:
        name = body["metadata"]["name"]
        self.calls.append(("create_pod", name))
        if name in self.pods:
            raise ClusterError(f"create pod {name}", 409, "AlreadyExists")
        pod = self._server_fields(copy.deepcopy(body))
        pod["status"] = {"phase": "Pending", "qosClass": "BestEffort", "conditions": [
            {"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": T0}]}
        self.pods[name] = pod
        self.logs[name] = ""
        self.created_pods.append(name)
        return copy.deepcopy(pod)

    def read_pod(self, name: str) -> dict | None:
        self.calls.append(("read_pod", name))
        pod = self.pods.get(name)
        if pod is None:
            return None
        self._tick(name, pod)
        return copy.deepcopy(pod)

    def read_log(self, name: str, container: str) -> str:
        if name not in self.pods or self.pods[name]["status"]["phase"] == "Pending":
            raise ClusterError(f"read log of pod {name}", 400, "container is waiting to start")
        return self.logs[name]

    def annotate(self, name: str, annotations: dict) -> dict:
        self.calls.append(("annotate", f"{name} {annotations}"))
        pod = self.pods[name]
        pod["metadata"].setdefault("annotations", {}).update(annotations)
        return copy.deepcopy(pod)

    def delete_pod(self, name: str) -> None:
        self.calls.append(("delete_pod", name))
        self.pods.pop(name)

    def exec_stdout(self, name: str, container: str, command: list[str], timeout_s: float):
        self.calls.append(("exec", name))
        if self.pods[name]["status"]["phase"] != "Running":
            raise ClusterError(f"exec in pod {name}", 400, "container not running")
        assert command[-1] == manifests.DATA_DIR
        local = [sys.executable, *command[1:-1], str(self.results_dir)]  # the real script, on the fake PVC
        proc = subprocess.run(local, capture_output=True, text=True, timeout=timeout_s)
        return proc.stdout, proc.returncode, proc.stderr

    # the simulated kubelet and pod ---------------------------------------
    def _server_fields(self, obj: dict) -> dict:
        obj["metadata"].update(uid=str(uuid.uuid4()), resourceVersion="4711", creationTimestamp=T0)
        return obj

    def _running(self, pod: dict, container: str) -> None:
        image = pod["spec"]["containers"][0]["image"]
        repo, _, digest = image.rpartition("@")
        pod["spec"].setdefault("nodeName", self.node)
        pod["status"].update(phase="Running", hostIP="10.0.3.17", podIP="10.244.1.9", startTime=T0, conditions=[
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": T0},
            {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": T0}])
        pod["status"]["containerStatuses"] = [{
            "name": container, "ready": True, "started": True, "restartCount": 0, "image": image,
            "imageID": f"{repo}@{self.image_digest or digest}",
            "containerID": "containerd://" + uuid.uuid4().hex + uuid.uuid4().hex,
            "state": {"running": {"startedAt": T0}}, "lastState": {}}]

    def _exit(self, pod: dict, code: int) -> None:
        status = pod["status"]["containerStatuses"][0]
        status.update(ready=False, started=False, state={"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": T0, "finishedAt": T0,
            "containerID": status["containerID"]}})
        pod["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
        pod["status"]["conditions"][-1].update(status="False")

    def _tick(self, name: str, pod: dict) -> None:
        phase = pod["status"]["phase"]
        uid = pod["metadata"]["uid"]
        notes = pod["metadata"].get("annotations") or {}
        if name.endswith("-collect"):
            if phase == "Pending":
                self._running(pod, "collect")
            return
        if phase == "Pending":
            self._running(pod, manifests.CONTAINER)
            self.logs[name] += "bench: checking the image's baked files\n" + _marker(
                "identity", uid=uid, ok=self.identity_ok,
                problems=[] if self.identity_ok else ["baked source sha256 aaaa differs from the mounted record's bbbb"])
            return
        if phase != "Running":
            return
        if not self.identity_ok:
            self._exit(pod, 3)
        elif notes.get(manifests.RELEASE_ANNOTATION) == manifests.ABORT:
            self.logs[name] += _marker("released", uid=uid, released=False, reason="abort")
            self._exit(pod, 4)
        elif notes.get(manifests.RELEASE_ANNOTATION) == uid and "released" not in markers.parse(self.logs[name]):
            self.logs[name] += _marker("released", uid=uid, released=True)
            if self.replace_after_release:
                pod["metadata"]["uid"] = str(uuid.uuid4())
                return
            if self.run_fails:
                self.logs[name] += _marker("run", workload="multi_turn", exit_code=1, run_json="runs/x/run.json", summary=None)
                self._exit(pod, 1)
                return
            for w in ("multi_turn", "long_generation", "tool_history", "multi_turn_salted"):
                self.logs[name] += _marker("run", workload=w, exit_code=0, run_json=f"runs/comparison/art/{w}/trial1/run.json",
                                           summary={"valid": True, "reasons": []})
            self.logs[name] += _marker("completed", uid=uid, ok=True, runs=4, data=manifests.DATA_DIR)
        elif notes.get(manifests.COLLECTED_ANNOTATION) == uid:
            self._exit(pod, 0)


class FakeApiServer:
    """TEST DOUBLE: `FakeCluster` behind the Kubernetes REST paths on 127.0.0.1, so the real
    `kubernetes` client (ClusterApi) can be exercised: create, read, log, patch, delete."""

    def __init__(self, cluster: FakeCluster, namespace: str):
        import json
        import re
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.cluster, self.requests = cluster, []
        base = f"/api/v1/namespaces/{namespace}/"
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _send(self, code: int, body, content_type="application/json"):
                data = (json.dumps(body) if content_type == "application/json" else body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                outer.requests.append((method, self.path, self.headers.get("Content-Type"), body))
                path = self.path.split("?", 1)[0]
                if not path.startswith(base):
                    return self._send(404, {"kind": "Status", "code": 404})
                rest = path[len(base):]
                try:
                    if method == "POST" and rest == "configmaps":
                        return self._send(201, outer.cluster.create_config_map(body))
                    if method == "POST" and rest == "pods":
                        return self._send(201, outer.cluster.create_pod(body))
                    m = re.fullmatch(r"pods/([^/]+)(/log)?", rest)
                    if not m:
                        return self._send(404, {"kind": "Status", "code": 404})
                    name, log = m.group(1), m.group(2)
                    if name not in outer.cluster.pods:
                        return self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                "reason": "NotFound", "code": 404})
                    if method == "GET" and log:
                        return self._send(200, outer.cluster.read_log(name, "benchmark"), "text/plain")
                    if method == "GET":
                        return self._send(200, outer.cluster.read_pod(name))
                    if method == "PATCH":
                        return self._send(200, outer.cluster.annotate(name, body["metadata"]["annotations"]))
                    if method == "DELETE":
                        outer.cluster.delete_pod(name)
                        return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                except ClusterError as exc:
                    return self._send(exc.status or 500, {"kind": "Status", "code": exc.status, "message": str(exc)})
                return self._send(405, {"kind": "Status", "code": 405})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_PATCH(self):
                self._route("PATCH")

            def do_DELETE(self):
                self._route("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path: Path, context: str, namespace: str) -> Path:
        import yaml

        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "not-a-secret"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester", "namespace": namespace}}],
        }))
        return path

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
