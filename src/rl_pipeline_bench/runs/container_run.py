"""Run one command inside a backend image through the Docker API, the lease staying on the host.

For a `runtime: container` suite the host's `bench run` (under the host's GPU lease)
starts the benchmark in the image that `bench preflight` proved, and waits until the
container is gone, so the lease is released only after its processes ended. The
container gets:

- the leased GPUs as one device request for exactly their UUIDs, the request
  `docker run --gpus '"device=UUID,..."'` makes (DeviceRequest with DeviceIDs and the
  `gpu` capability, docker/cli opts/gpus.go);
- bind mounts of evidence (read-write), the model cache and provenance records
  (read-only) at their host paths, so every path the host passes is valid inside.
  Nothing may be mounted over the image's benchmark code or environment
  (`PROTECTED_PATHS`): what runs is what was built and hashed;
- a control directory (read-only) holding `container.json`, written after the
  container is created and before it starts: its id, name, image and device
  requests, which the in-container run records in its manifest.

Engines: whatever DOCKER_HOST names (Docker, or podman's Docker-API service).
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator, Mapping, Sequence
from ..records.formats import schema_of
from ..records.jsonfile import read_record

CONTROL_TARGET = "/rl-bench/control"
CONTROL_FILE = "container.json"
#: Environment variable naming the control file inside the container.
CONTROL_ENV = "RL_BENCH_CONTAINER_CONTROL"
CONTAINER_SCHEMA = schema_of("container")
#: Image paths a run may never mount over: the benchmark tree, its environment, the tools.
PROTECTED_PATHS = ("/opt/rl-bench", "/opt/env", "/opt/uv", "/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc")
LABEL_RUN = "rl-bench.run-id"


class ContainerRunError(RuntimeError):
    """The container could not be created, started or cleaned up; the message says which."""


class ContainerInterrupted(RuntimeError):
    """The host process got SIGTERM/SIGINT while the container ran; the container was stopped."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}; container stopped")
        self.signum = signum


@dataclass(frozen=True)
class Mount:
    """A bind mount; `target` defaults to the host path itself."""

    source: str
    read_only: bool = True
    target: str | None = None

    @property
    def path_inside(self) -> str:
        return self.target or self.source

    def docker(self):
        from docker.types import Mount as DockerMount

        return DockerMount(target=self.path_inside, source=self.source, type="bind", read_only=self.read_only)


def bind(path: Path | str, *, read_only: bool = True) -> Mount:
    """A bind mount of an existing host path at the same absolute path inside the container."""
    resolved = Path(path).resolve()
    if not resolved.exists():
        raise ContainerRunError(f"cannot mount {path}: it does not exist on the host")
    return Mount(source=str(resolved), read_only=read_only)


def check_mounts(mounts: Sequence[Mount]) -> None:
    """Refuse a mount over (or above) the image's own code and environment, naming it."""
    for m in mounts:
        inside = PurePosixPath(m.path_inside)
        if not inside.is_absolute():
            raise ContainerRunError(f"mount target {inside} is not absolute")
        for protected in map(PurePosixPath, PROTECTED_PATHS):
            if inside == protected or protected in inside.parents or inside in protected.parents:
                raise ContainerRunError(
                    f"refusing to mount {m.source} at {inside}: it would replace the image's {protected} "
                    "(the benchmark code and environment must be the ones the image was built and hashed with)"
                )


def gpu_device_requests(uuids: Sequence[str]) -> list:
    """Device requests for exactly these GPUs: what `--gpus '"device=UUID,..."'` sends. None for no GPUs."""
    from docker.types import DeviceRequest

    uuids = [u for u in uuids if u]
    if not uuids:
        return []
    return [DeviceRequest(device_ids=list(uuids), capabilities=[["gpu"]])]


@dataclass
class ContainerResult:
    """What happened to one container: recorded in the host's run.json."""

    container_id: str
    name: str
    image_id: str
    exit_code: int
    started_at: str
    finished_at: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM/SIGINT become ContainerInterrupted in this thread, so the container is stopped first.

    Only the main thread can handle signals; elsewhere the caller's handlers stay.
    """

    def handler(signum, frame):
        raise ContainerInterrupted(signum)

    try:
        previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread
        previous = {}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _stream_lines(chunks, log: Callable[[str], None]) -> None:
    """Forward a container's output to log line by line (chunks may split lines)."""
    pending = ""
    for chunk in chunks:
        pending += chunk.decode(errors="replace")
        *lines, pending = pending.split("\n")
        for line in lines:
            log(line)
    if pending:
        log(pending)


def run_container(
    image_id: str,
    command: Sequence[str],
    *,
    mounts: Sequence[Mount] = (),
    environment: Mapping[str, str] | None = None,
    gpu_uuids: Sequence[str] = (),
    name: str | None = None,
    labels: Mapping[str, str] | None = None,
    network_mode: str = "none",
    user: str | None = None,
    working_dir: str | None = None,
    stop_timeout: int = 60,
    client=None,
    log: Callable[[str], None] = print,
    extra_host_config: Mapping[str, Any] | None = None,
) -> ContainerResult:
    """Create, start, stream and remove one container; return its result (exit code included).

    SIGTERM or SIGINT while it runs stops the container (stop_timeout seconds, then
    kill), waits for it and removes it before ContainerInterrupted propagates. The
    function returns only once the engine no longer has the container.
    """
    from docker.errors import DockerException

    from ..provenance.images import engine_client

    check_mounts(mounts)
    client = client or engine_client()
    api = client.api
    requests = gpu_device_requests(gpu_uuids)
    control_dir = Path(tempfile.mkdtemp(prefix="rl-bench-container-"))
    all_mounts = [*mounts, Mount(source=str(control_dir), read_only=True, target=CONTROL_TARGET)]
    env = {"HOME": "/tmp", **(environment or {}), CONTROL_ENV: f"{CONTROL_TARGET}/{CONTROL_FILE}"}
    container_id = None
    started = time.monotonic()
    started_at = _utc_now()
    try:
        try:
            host_config = api.create_host_config(mounts=[m.docker() for m in all_mounts], device_requests=requests or None,
                                                 network_mode=network_mode, **dict(extra_host_config or {}))
            container_id = api.create_container(image_id, command=list(command), name=name, environment=env,
                                                labels=dict(labels or {}), user=user, working_dir=working_dir,
                                                host_config=host_config, detach=True)["Id"]
            info = api.inspect_container(container_id)
        except DockerException as exc:
            raise ContainerRunError(f"could not create a container from image {image_id}: {exc}") from exc
        control = {
            "schema": CONTAINER_SCHEMA,
            "container_id": container_id,
            "name": (info.get("Name") or "").lstrip("/") or name,
            "image_id": info.get("Image") or image_id,
            "device_requests": [dict(r) for r in requests],
            "gpu_uuids": list(gpu_uuids),
            "mounts": [{"source": m.source, "target": m.path_inside, "read_only": m.read_only} for m in mounts],
            "network_mode": network_mode,
            "user": user,
            "docker_host": os.environ.get("DOCKER_HOST"),
            "created_at": started_at,
        }
        (control_dir / CONTROL_FILE).write_text(json.dumps(control, indent=2, sort_keys=True) + "\n")
        log(f"container {container_id[:12]} ({control['name']}) from image {image_id}: {' '.join(command)}")
        with _signals_raise():
            try:
                api.start(container_id)
                _stream_lines(api.logs(container_id, stream=True, follow=True), log)
                exit_code = int(api.wait(container_id).get("StatusCode", -1))
            except ContainerInterrupted:
                log(f"stopping container {container_id[:12]} (timeout {stop_timeout}s)")
                _stop(api, container_id, stop_timeout)
                raise
            except DockerException as exc:
                raise ContainerRunError(f"container {container_id[:12]} failed to run: {exc}") from exc
        log(f"container {container_id[:12]} exited with {exit_code}")
    finally:
        removed = container_id is None or _remove(api, container_id, stop_timeout, log)
        for p in control_dir.iterdir():
            p.unlink()
        control_dir.rmdir()
    if not removed:
        raise ContainerRunError(f"container {container_id[:12]} exited with {exit_code} but could not be removed; "
                                "remove it with the engine before reusing its GPUs")
    return ContainerResult(container_id, control["name"], control["image_id"], exit_code, started_at, _utc_now(),
                           round(time.monotonic() - started, 3))


def _stop(api, container_id: str, timeout: int) -> None:
    from docker.errors import DockerException

    try:
        api.stop(container_id, timeout=timeout)
        api.wait(container_id)
    except DockerException:
        pass  # already gone; _remove confirms


def _remove(api, container_id: str, timeout: int, log: Callable[[str], None]) -> bool:
    """Remove the container (stopping it if it still runs); True once the engine no longer has it."""
    from docker.errors import DockerException, NotFound

    try:
        state = api.inspect_container(container_id).get("State", {})
        if state.get("Running"):
            _stop(api, container_id, timeout)
        api.remove_container(container_id, force=True)
    except NotFound:
        return True
    except DockerException as exc:
        log(f"removing container {container_id[:12]} failed: {exc}")
    try:
        api.inspect_container(container_id)
    except NotFound:
        return True
    except DockerException:
        return False
    return False


def read_control(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """Inside a container started by run_container: its control record (id, image, devices); else None."""
    env = os.environ if env is None else env
    path = env.get(CONTROL_ENV)
    if not path:
        return None
    data = read_record(path, "container", f"container control record ({CONTROL_ENV})", ContainerRunError)
    return data
