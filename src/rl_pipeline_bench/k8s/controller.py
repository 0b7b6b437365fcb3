"""The external controller: one pod, checked before release and after completion, never rerun.

States, persisted in OUTPUT/qualification.json after every step (so --resume can
pick up exactly where a killed controller stopped, observing the same pod):
  prepared  -> manifests written, nothing created yet
  created   -> ConfigMap and pod created; the pod UID is recorded
  verified  -> pod UID and actual imageID match, the pod's baked hashes match the record
  released  -> the benchmark was released (annotation rl-bench/release = UID)
  finished  -> the runs ended (pod holding for collection, or exited); UID and imageID checked again
  collected -> artifacts read through the API into OUTPUT/artifacts (or the attempt recorded)
  closed    -> the pod exited; its final object and log are kept in OUTPUT; outcome decided
Outcomes: completed, failed, refused (identity or image mismatch: the benchmark never ran).
A failed or refused invocation is final: nothing here creates a second pod or reruns a
workload, and the benchmark pod is never deleted (its record stays in the cluster).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..records.atomicfile import write_json_atomic
from . import collect, manifests, markers
from .api import ClusterError
from .request import QualifyRequest
from ..records.formats import schema_of
from ..records.jsonfile import read_record

SCHEMA = schema_of("k8s-qualification")
RECORD_FILE = "qualification.json"
STATES = ("prepared", "created", "verified", "released", "finished", "collected", "closed")
EXIT_CODES = {"completed": 0, "failed": 1, "refused": 3}
_IMAGE_WAIT_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                       "CreateContainerError")


class ResumeRefused(RuntimeError):
    """--resume cannot observe the saved invocation (no record, or the pod is not the saved one)."""


@dataclass(frozen=True)
class Timeouts:
    start_s: float = 1800.0  # pod scheduled, image pulled, identity reported
    run_s: float = 72 * 3600.0  # all workloads
    exit_s: float = 600.0  # pod exit after collection
    exec_s: float = 1800.0  # one artifact transfer
    poll_s: float = 10.0


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def image_digest(image_id: str | None) -> str | None:
    """The sha256 digest inside a container status imageID (docker-pullable://repo@sha256:..., repo@sha256:...)."""
    if not image_id or "@" not in image_id:
        return None
    digest = image_id.rsplit("@", 1)[1]
    return digest if digest.startswith("sha256:") else None


def container_status(pod: dict[str, Any]) -> dict[str, Any] | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == manifests.CONTAINER:
            return status
    return None


def exit_code(pod: dict[str, Any]) -> int | None:
    state = (container_status(pod) or {}).get("state") or {}
    return (state.get("terminated") or {}).get("exitCode")


def verify_pod(pod: dict[str, Any], uid: str, digest: str) -> list[str]:
    """Problems with the pod's identity: its UID must be the created one, its imageID the requested digest."""
    problems = []
    actual_uid = (pod.get("metadata") or {}).get("uid")
    if actual_uid != uid:
        problems.append(f"pod UID is {actual_uid}, the controller created {uid}: the pod was replaced")
    status = container_status(pod)
    actual = image_digest((status or {}).get("imageID"))
    if actual is None:
        problems.append(f"container {manifests.CONTAINER!r} reports no imageID digest ({(status or {}).get('imageID')!r})")
    elif actual != digest:
        problems.append(f"container runs image digest {actual}, requested {digest}")
    return problems


class Controller:
    def __init__(self, req: QualifyRequest, api, output: Path, timeouts: Timeouts = Timeouts(),
                 say: Callable[[str], None] = print, record: dict[str, Any] | None = None):
        self.req, self.api, self.out, self.t, self.say = req, api, Path(output), timeouts, say
        self.record = record

    # record ----------------------------------------------------------------
    @property
    def state(self) -> str:
        return self.record["state"]

    def _save(self) -> None:
        write_json_atomic(self.record, self.out / RECORD_FILE)

    def _advance(self, state: str, **fields: Any) -> None:
        self.record.update(fields, state=state)
        self.record["history"].append({"state": state, "at": utc_now()})
        self._save()
        self.say(f"qualify: {state}" + (f" ({fields.get('note')})" if fields.get("note") else ""))

    def _finish(self, outcome: str, reason: str | None = None) -> int:
        self.record.update(outcome=outcome, reason=reason, finished_at=utc_now())
        self._save()
        self.say(f"qualify: outcome {outcome}" + (f": {reason}" if reason else "") + f"; record {self.out / RECORD_FILE}")
        return EXIT_CODES[outcome]

    def _keep(self, name: str, obj: Any) -> None:
        write_json_atomic(obj if isinstance(obj, dict) else {"value": obj}, self.out / name)

    # start -----------------------------------------------------------------
    def start(self) -> int:
        """Fresh invocation: create OUTPUT (must not exist), the ConfigMap and the pod, then observe."""
        self.out.mkdir(parents=True, exist_ok=False)
        pod, cm = manifests.pod_manifest(self.req), manifests.configmap_manifest(self.req)
        self._keep("pod-requested.json", pod)
        self._keep("configmap-requested.json", cm)
        self.record = {"schema": SCHEMA, "request": self.req.to_dict(), "state": "prepared", "history": [],
                       "pod": {"name": self.req.name, "namespace": self.req.namespace, "uid": None},
                       "outcome": None, "started_at": utc_now()}
        self._advance("prepared")
        try:
            self.api.create_config_map(cm)
            created = self.api.create_pod(pod)
        except ClusterError as exc:
            return self._finish("failed", f"could not create the pod: {exc}")
        self.record["pod"]["uid"] = created["metadata"]["uid"]
        self._advance("created", note=f"pod {self.req.namespace}/{self.req.name} uid {created['metadata']['uid']}")
        return self.observe()

    @classmethod
    def resume(cls, api_factory, output: Path, timeouts: Timeouts = Timeouts(), say=print) -> int:
        path = Path(output) / RECORD_FILE
        if not path.is_file():
            raise ResumeRefused(f"--resume: no {RECORD_FILE} in {output}; nothing to observe (a fresh invocation needs a new --output)")
        record = read_record(path, "k8s-qualification", "--resume: qualification record", ResumeRefused)
        req = QualifyRequest.from_dict(record["request"])
        ctl = cls(req, api_factory(req), output, timeouts, say, record)
        if record.get("outcome"):
            say(f"qualify: invocation already ended with outcome {record['outcome']} ({record.get('reason') or 'no reason recorded'}); "
                "nothing is rerun")
            return EXIT_CODES[record["outcome"]]
        pod = ctl.api.read_pod(req.name)
        if record["pod"]["uid"] is None:  # killed between create and save: adopt only our own pod
            if pod is None or (pod["metadata"].get("labels") or {}).get("rl-bench/invocation") != req.invocation:
                return ctl._finish("failed", "no pod of this invocation exists (it was never created); start a fresh invocation "
                                             "with a new --output and --name")
            record["pod"]["uid"] = pod["metadata"]["uid"]
            ctl._advance("created", note="adopted the pod this invocation created")
        elif pod is None:
            return ctl._finish("failed", f"pod {req.namespace}/{req.name} (uid {record['pod']['uid']}) no longer exists; not recreated")
        elif pod["metadata"]["uid"] != record["pod"]["uid"]:
            raise ResumeRefused(f"--resume: pod {req.name} now has UID {pod['metadata']['uid']}, the saved invocation created "
                                f"{record['pod']['uid']}; it is not the same pod, so it is not observed")
        say(f"qualify: resuming {req.namespace}/{req.name} (uid {record['pod']['uid']}) from state {record['state']}")
        return ctl.observe()

    # observe ---------------------------------------------------------------
    def observe(self) -> int:
        steps = {"created": self._verify, "verified": self._release, "released": self._await_completion,
                 "finished": self._collect, "collected": self._await_exit}
        while self.record.get("outcome") is None:
            step = steps.get(self.state)
            if step is None:
                return self._finish("failed", f"record in unexpected state {self.state!r}")
            code = step()
            if code is not None:
                return code
        return EXIT_CODES[self.record["outcome"]]

    def _read(self) -> dict[str, Any] | None:
        pod = self.api.read_pod(self.req.name)
        if pod is not None and pod["metadata"].get("uid") != self.record["pod"]["uid"]:
            return {"replaced": pod}
        return pod

    def _log(self) -> str:
        try:
            return self.api.read_log(self.req.name, manifests.CONTAINER)
        except ClusterError:
            return ""  # container not started yet

    def _poll(self, timeout_s: float, done: Callable[[dict[str, Any], str], bool], what: str):
        """Poll pod and log until done(pod, log) or the pod is gone/replaced/ended; (pod, log, why)."""
        deadline = time.monotonic() + timeout_s
        last_reason = None
        while True:
            pod = self._read()
            if pod is None:
                return None, "", "the pod no longer exists (it is never recreated)"
            if "replaced" in pod:
                return None, "", f"pod {self.req.name} now has UID {pod['replaced']['metadata'].get('uid')}: replaced, not ours"
            log = self._log()
            if done(pod, log):
                return pod, log, None
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                return pod, log, f"the pod ended (phase {phase}, exit code {exit_code(pod)}) while waiting for {what}"
            waiting = ((container_status(pod) or {}).get("state") or {}).get("waiting") or {}
            if waiting.get("reason") and waiting.get("reason") != last_reason:
                last_reason = waiting["reason"]
                self.say(f"qualify: container waiting: {last_reason} {waiting.get('message') or ''}".rstrip())
            if time.monotonic() >= deadline:
                hint = f" (last container state: {last_reason})" if last_reason in _IMAGE_WAIT_REASONS else ""
                return pod, log, f"no {what} after {timeout_s:g} s{hint}"
            time.sleep(self.t.poll_s)

    def _abort_pod(self) -> None:
        try:
            self.api.annotate(self.req.name, {manifests.RELEASE_ANNOTATION: manifests.ABORT})
        except ClusterError as exc:
            self.say(f"qualify: could not tell the pod to abort: {exc}")

    def _verify(self) -> int | None:
        pod, log, why = self._poll(self.t.start_s, lambda p, text: "identity" in markers.parse(text), "identity report from the pod")
        if pod is not None:
            self._keep("pod-observed-verify.json", pod)
        if why:
            self._abort_pod()
            return self._finish("failed", why)
        problems = verify_pod(pod, self.record["pod"]["uid"], self.req.image.digest)
        identity = markers.parse(log)["identity"]
        self.record["pre_release"] = {"pod_problems": problems, "identity": identity,
                                      "image_id": (container_status(pod) or {}).get("imageID"), "node": pod["spec"].get("nodeName")}
        problems += list(identity.get("problems") or []) if not identity.get("ok") else []
        if problems:
            self._abort_pod()
            self._save()
            return self._finish("refused", "; ".join(problems))
        self._advance("verified", note=f"imageID {self.record['pre_release']['image_id']} on node {self.record['pre_release']['node']}")
        return None

    def _release(self) -> int | None:
        try:
            self.api.annotate(self.req.name, {manifests.RELEASE_ANNOTATION: self.record["pod"]["uid"]})
        except ClusterError as exc:
            self._abort_pod()
            return self._finish("failed", f"could not release the benchmark: {exc}")
        self._advance("released", note="benchmark released; the workloads run serially")
        return None

    def _await_completion(self) -> int | None:
        seen: set[str] = set()

        def done(pod, log):
            for r in markers.runs(log):
                if r["workload"] not in seen:
                    seen.add(r["workload"])
                    self.say(f"qualify: run {r['workload']} exit code {r['exit_code']} summary {r.get('summary')}")
            return "completed" in markers.parse(log)

        pod, log, why = self._poll(self.t.run_s, done, "completion report")
        if pod is None:
            return self._finish("failed", why)
        self._keep("pod-observed-finish.json", pod)
        problems = verify_pod(pod, self.record["pod"]["uid"], self.req.image.digest)
        self._advance("finished", post_completion={"pod_problems": problems, "completed": markers.parse(log).get("completed"),
                                                   "runs": markers.runs(log), "waiting_ended": why,
                                                   "image_id": (container_status(pod) or {}).get("imageID")})
        return None

    def _collect(self) -> int | None:
        pod = self._read()
        if pod is None or "replaced" in pod:
            return self._finish("failed", "the pod vanished or was replaced before its artifacts were collected")
        running = (pod.get("status") or {}).get("phase") == "Running"
        dest = self.out / "artifacts"
        try:
            if running:
                result = self._collect_from(self.req.name, manifests.CONTAINER, dest)
            else:
                result = self._collect_with_helper(pod, dest)
        except (ClusterError, collect.CollectError, FileExistsError) as exc:
            result = {"error": str(exc)}
            self.say(f"qualify: artifacts NOT collected: {exc} (they stay on PVC {self.req.pvc}:{manifests.data_subpath(self.req)})")
        if running:
            try:
                self.api.annotate(self.req.name, {manifests.COLLECTED_ANNOTATION: self.record["pod"]["uid"]})
            except ClusterError as exc:
                self.say(f"qualify: could not tell the pod to exit: {exc}")
        self._advance("collected", artifacts=result, note=f"{result.get('files', 0)} files in {dest}" if "error" not in result else "failed")
        return None

    def _collect_from(self, pod_name: str, container: str, dest: Path) -> dict[str, Any]:
        stdout, code, stderr = self.api.exec_stdout(pod_name, container, collect.archive_command(manifests.DATA_DIR), self.t.exec_s)
        if code not in (0, None):
            raise collect.CollectError(f"archive command exited {code} in pod {pod_name}: {stderr.strip()[-500:]}")
        return {**collect.unpack(stdout, dest), "via": f"exec in pod {pod_name}"}

    def _collect_with_helper(self, pod: dict[str, Any], dest: Path) -> dict[str, Any]:
        """The benchmark pod exited: read the PVC through a short-lived pod on the same node."""
        body = manifests.collector_manifest(self.req, pod["spec"].get("nodeName"))
        self._keep("collector-requested.json", body)
        name = body["metadata"]["name"]
        self.api.create_pod(body)
        try:
            deadline = time.monotonic() + self.t.start_s
            while True:
                helper = self.api.read_pod(name)
                phase = ((helper or {}).get("status") or {}).get("phase")
                if phase == "Running":
                    break
                if helper is None or phase in ("Succeeded", "Failed") or time.monotonic() >= deadline:
                    raise ClusterError(f"collector pod {name}", None, f"not running (phase {phase})")
                time.sleep(self.t.poll_s)
            return self._collect_from(name, "collect", dest)
        finally:
            try:
                self.api.delete_pod(name)  # only the helper; the benchmark pod is kept
            except ClusterError as exc:
                self.say(f"qualify: could not delete collector pod {name}: {exc}")

    def _await_exit(self) -> int | None:
        pod, log, why = self._poll(self.t.exit_s, lambda p, text: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
                                   "pod exit")
        if pod is None:
            return self._finish("failed", why)
        self._keep("pod-final.json", pod)
        (self.out / "pod.log").write_text(log)
        found = markers.parse(log)
        problems = verify_pod(pod, self.record["pod"]["uid"], self.req.image.digest)
        completed = found.get("completed") or {}
        self._advance("closed", final={"phase": pod["status"].get("phase"), "exit_code": exit_code(pod),
                                       "pod_problems": problems, "still_running": why})
        reasons = list(problems)
        if exit_code(pod) != 0:
            reasons.append(f"pod exited with code {exit_code(pod)}")
        if not completed.get("ok"):
            failed = [r for r in markers.runs(log) if r.get("exit_code") != 0]
            reasons.append("runs did not all complete" + (f": {failed[0]['workload']} exited {failed[0]['exit_code']}" if failed else ""))
        invalid = [r["workload"] for r in markers.runs(log) if (r.get("summary") or {}).get("valid") is False]
        if invalid:
            reasons.append(f"invalid runs: {', '.join(invalid)}")
        if "error" in (self.record.get("artifacts") or {}):
            reasons.append(f"artifacts not collected: {self.record['artifacts']['error']}")
        return self._finish("failed" if reasons else "completed", "; ".join(reasons) or None)
