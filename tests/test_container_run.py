"""Container runs through the Docker API (podman + runc here): mounts, control record, exit, stop.

Uses the debootstrap base image of .ci/setup_podman.sh (no benchmark inside): these
tests are about the container mechanics the benchmark run relies on. GPU device
requests cannot be exercised here (no GPU, and podman 4.3 ignores them); their
payload is checked against what the docker CLI sends for `--gpus`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from rl_pipeline_bench.runs import container_run
from rl_pipeline_bench.runs.container_run import ContainerRunError, Mount, bind, check_mounts, gpu_device_requests

BASE_IMAGE = os.environ.get("RL_BENCH_BASE_IMAGE", "localhost/rl-bench/debian-python:bookworm")
PODMAN_SOCK = "/run/podman/podman.sock"


def test_gpu_requests_are_the_docker_cli_gpus_device_request():
    # docker/cli opts/gpus.go: `--gpus '"device=A,B"'` -> DeviceIDs [A, B], Count 0, Capabilities [["gpu"]].
    reqs = gpu_device_requests(["GPU-aaaa", "GPU-bbbb"])
    assert [dict(r) for r in reqs] == [{"Driver": "", "Count": 0, "DeviceIDs": ["GPU-aaaa", "GPU-bbbb"],
                                        "Capabilities": [["gpu"]], "Options": {}}]
    assert gpu_device_requests([]) == []
    from docker import APIClient

    host_config = APIClient(base_url="unix:///nonexistent", version="1.41").create_host_config(device_requests=reqs)
    assert host_config["DeviceRequests"][0]["DeviceIDs"] == ["GPU-aaaa", "GPU-bbbb"]


@pytest.mark.parametrize("target", ["/opt/rl-bench", "/opt/rl-bench/src", "/opt", "/opt/env/reference/.venv", "/usr/lib"])
def test_mounting_over_the_image_code_or_environment_is_refused(target, tmp_path):
    with pytest.raises(ContainerRunError, match="would replace the image's"):
        check_mounts([Mount(source=str(tmp_path), target=target)])
    check_mounts([Mount(source=str(tmp_path), target="/work/results/evidence")])  # elsewhere: fine
    with pytest.raises(ContainerRunError, match="does not exist"):
        bind(tmp_path / "missing")


@pytest.fixture(scope="module")
def engine():
    if not os.environ.get("DOCKER_HOST") and os.path.exists(PODMAN_SOCK):
        os.environ["DOCKER_HOST"] = f"unix://{PODMAN_SOCK}"
    from rl_pipeline_bench.provenance.images import ImageError, engine_client

    try:
        client = engine_client(timeout=300)
    except ImageError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the podman engine (.ci/setup_podman.sh): {exc}")
        pytest.skip(f"no container engine reachable (run `sudo bash .ci/setup_podman.sh`): {exc}")
    client.images.get(BASE_IMAGE)
    return client


def _gone(client, container_id: str) -> bool:
    from docker.errors import NotFound

    try:
        client.api.inspect_container(container_id)
    except NotFound:
        return True
    return False


@pytest.mark.podman
def test_run_mounts_evidence_rw_inputs_ro_and_reports_the_exit_code(engine, tmp_path):
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    record = tmp_path / "inputs" / "record.json"
    record.parent.mkdir()
    record.write_text('{"x": 1}')
    script = (f'cp "$RL_BENCH_CONTAINER_CONTROL" {evidence}/control.json; echo written > {evidence}/out.txt; '
              f'cat {record}; echo; (echo changed > {record}) 2>/dev/null || echo READ-ONLY; exit 3')
    lines: list[str] = []
    result = container_run.run_container(BASE_IMAGE, ["sh", "-c", script], client=engine, log=lines.append,
                                         mounts=[bind(evidence, read_only=False), bind(record)],
                                         labels={container_run.LABEL_RUN: "pytest"})
    assert result.exit_code == 3
    assert (evidence / "out.txt").read_text() == "written\n"
    assert record.read_text() == '{"x": 1}' and "READ-ONLY" in lines
    control = json.loads((evidence / "control.json").read_text())
    assert control["container_id"] == result.container_id and control["network_mode"] == "none"
    assert {"source": str(evidence.resolve()), "target": str(evidence.resolve()), "read_only": False} in control["mounts"]
    assert _gone(engine, result.container_id), "the container must be removed after the run"


@pytest.mark.podman
def test_sigterm_stops_and_removes_the_container(engine, tmp_path):
    tag = f"pytest-{uuid.uuid4().hex[:8]}"
    code = ("import sys; from rl_pipeline_bench.runs import container_run as c\n"
            "try:\n"
            f"    c.run_container({BASE_IMAGE!r}, ['sleep', '300'], labels={{c.LABEL_RUN: {tag!r}}}, stop_timeout=2)\n"
            "except c.ContainerInterrupted as e:\n"
            "    print('interrupted', e.signum); sys.exit(128 + e.signum)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    running = []
    while time.monotonic() < deadline and not running:
        running = engine.containers.list(filters={"label": f"{container_run.LABEL_RUN}={tag}", "status": "running"})
        time.sleep(0.5)
    assert running, "the container never started"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted 15" in out
    assert _gone(engine, running[0].id), "SIGTERM must stop and remove the container before the host process exits"
