"""The controller's only edge to a cluster: a few calls of the official `kubernetes` client.

Everything returned is a plain dict with the API's own field names (the client's
`sanitize_for_serialization`), so the controller reads pods exactly as `kubectl get
-o json` shows them, and its tests can replay recorded API objects. No API server
can run on this project's machines: the REST calls here are tested against an HTTP test
double (tests/test_kubernetes.py); the exec websocket is not executed here.
"""

from __future__ import annotations

import time
from typing import Any


class ClusterError(RuntimeError):
    """An API call failed; `status` is the HTTP status (404 = not found) when there is one."""

    def __init__(self, what: str, status: int | None, detail: str):
        super().__init__(f"{what}: {detail}" + (f" (HTTP {status})" if status else ""))
        self.status = status


class ClusterApi:
    def __init__(self, context: str | None, namespace: str, config_file: str | None = None):
        from kubernetes import client, config

        try:  # config_file None: $KUBECONFIG or ~/.kube/config, as kubectl reads it
            self.api_client = config.new_client_from_config(config_file=config_file, context=context)
        except config.ConfigException as exc:
            raise ClusterError(f"kubeconfig context {context or '(current)'}", None, str(exc)) from None
        self.core = client.CoreV1Api(self.api_client)
        self.namespace = namespace

    def _call(self, what: str, fn, *args, **kwargs) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            result = fn(*args, **kwargs)
        except ApiException as exc:
            raise ClusterError(what, exc.status, exc.reason or str(exc)) from None
        return self.api_client.sanitize_for_serialization(result)

    def create_config_map(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(f"create ConfigMap {body['metadata']['name']}", self.core.create_namespaced_config_map, self.namespace, body)

    def create_pod(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(f"create pod {body['metadata']['name']}", self.core.create_namespaced_pod, self.namespace, body)

    def read_pod(self, name: str) -> dict[str, Any] | None:
        try:
            return self._call(f"read pod {name}", self.core.read_namespaced_pod, name, self.namespace)
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def read_log(self, name: str, container: str) -> str:
        return self._call(f"read log of pod {name}", self.core.read_namespaced_pod_log, name, self.namespace,
                          container=container) or ""

    def annotate(self, name: str, annotations: dict[str, str]) -> dict[str, Any]:
        return self._call(f"annotate pod {name}", self.core.patch_namespaced_pod, name, self.namespace,
                          {"metadata": {"annotations": annotations}})

    def delete_pod(self, name: str) -> None:
        self._call(f"delete pod {name}", self.core.delete_namespaced_pod, name, self.namespace)

    def exec_stdout(self, name: str, container: str, command: list[str], timeout_s: float) -> tuple[str, int | None, str]:
        """Run `command` in a running container; (stdout, exit code, stderr) through the exec websocket."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        try:
            resp = stream(self.core.connect_get_namespaced_pod_exec, name, self.namespace, container=container,
                          command=command, stdin=False, stdout=True, stderr=True, tty=False, _preload_content=False)
        except ApiException as exc:
            raise ClusterError(f"exec in pod {name}", exc.status, exc.reason or str(exc)) from None
        out, err = [], []
        deadline = time.monotonic() + timeout_s
        try:
            while resp.is_open():
                resp.update(timeout=1)
                if resp.peek_stdout():
                    out.append(resp.read_stdout())
                if resp.peek_stderr():
                    err.append(resp.read_stderr())
                if time.monotonic() > deadline:
                    raise ClusterError(f"exec in pod {name}", None, f"no end after {timeout_s:g} s")
            try:  # the exit status arrives on the error channel before the server closes
                code = resp.returncode
            except (TypeError, KeyError, IndexError, ValueError):
                code = None
        finally:
            resp.close()
        return "".join(out), code, "".join(err)
