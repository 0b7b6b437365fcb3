"""A raising signal handler on an event loop: asyncio.run lets a task swallow it; run_until_signalled does not.

Real signals to this process (SIGTERM from os.kill), real asyncio; the handler raises as the
image's does (image_runs.stop_on_sigterm).
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from rl_pipeline_bench.backends.framework.async_signals import run_until_signalled


class Stopped(RuntimeError):
    pass


@pytest.fixture
def raising_sigterm():
    def handler(signum, frame):
        raise Stopped(signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield handler
    finally:
        signal.signal(signal.SIGTERM, old)


async def _work_that_swallows(progress: list[str]):
    """Like a driver's rollout: trajectories gathered with return_exceptions=True, then more work."""
    async def trajectory(i):
        if i == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # the engine stops the container mid-rollout
            await asyncio.sleep(0.2)
        return i

    results = await asyncio.gather(*(trajectory(i) for i in range(3)), return_exceptions=True)
    progress.append(f"gathered {[type(r).__name__ for r in results]}")
    await asyncio.sleep(0.05)
    progress.append("trained on")
    return results


def test_plain_asyncio_run_lets_a_task_swallow_the_signal(raising_sigterm):
    """The failure run_until_signalled exists for, shown on plain asyncio.run."""
    progress: list[str] = []
    asyncio.run(_work_that_swallows(progress))
    assert progress == ["gathered ['int', 'Stopped', 'int']", "trained on"]


def test_the_signal_ends_the_run_whole_and_the_handler_is_kept(raising_sigterm):
    progress: list[str] = []
    with pytest.raises(Stopped):
        run_until_signalled(lambda: _work_that_swallows(progress))
    assert progress == []  # cancelled mid-gather: no step after the signal ran
    assert signal.getsignal(signal.SIGTERM) is raising_sigterm  # the process's handler is back


def test_without_a_python_handler_nothing_is_installed():
    async def main():
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        return 7

    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert run_until_signalled(main) == 7


def test_record_before_runs_first_then_the_frameworks_handler(raising_sigterm, tmp_path):
    """As the SkyRL driver chains Ray's sys.exit handler: the manifest says `failed` before it runs."""
    from rl_pipeline_bench.backends.framework.async_signals import record_before
    from rl_pipeline_bench.evidence.store import EvidenceWriter, read_evidence

    writer = EvidenceWriter(tmp_path, "run-1", {"backend": "skyrl"})
    record_before(signal.SIGTERM, writer.record_interruption)
    with pytest.raises(Stopped):
        os.kill(os.getpid(), signal.SIGTERM)
    manifest = read_evidence(writer.path).manifest
    assert manifest["status"] == "failed" and manifest["error"] == "interrupted by SIGTERM"
    assert not writer.finished  # the failure path may still finish it with the whole tables
    writer.finish("failed", error="SystemExit: 15")
    assert read_evidence(writer.path).manifest["error"] == "SystemExit: 15"
    writer.record_interruption(signal.SIGTERM)  # a late signal changes nothing once finished
    assert read_evidence(writer.path).manifest["error"] == "SystemExit: 15"
