"""A raising signal handler on an event loop: asyncio.run lets a task swallow it; run_until_signalled does not.

Real signals to this process (SIGTERM from os.kill), real asyncio; the handler raises as the
image's does (image_runs.stop_on_sigterm).
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from rl_pipeline_bench.async_signals import run_until_signalled


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
