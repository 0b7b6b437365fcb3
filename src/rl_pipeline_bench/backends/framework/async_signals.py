"""Signals for drivers whose framework runs an event loop or replaces the process's handlers.

`run_until_signalled`: asyncio.run in which a signal ends the run whole.

A Python signal handler that raises (the image's SIGTERM handler, image_runs.stop_on_sigterm)
raises inside whatever runs at that moment. On an event loop that is usually some task's
step, and the exception becomes that task's result: `asyncio.gather(..., return_exceptions=True)`
or a framework's own error handling can swallow it, and the run goes on after the engine
asked it to stop. Here the signal instead cancels the main task; once the loop has unwound,
the process's own handler runs, outside every task, so its exception ends the run.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Awaitable, Callable


def run_until_signalled(main: Callable[[], Awaitable[Any]], signals=(signal.SIGTERM,)) -> Any:
    """asyncio.run(main()), with each of `signals` whose Python handler is callable cancelling it."""
    received: list[int] = []

    async def guarded():
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        restore = {}
        for signum in signals:
            handler = signal.getsignal(signum)
            if not callable(handler):
                continue  # default or ignored: the signal keeps its own effect
            try:
                loop.add_signal_handler(signum, lambda s=signum: (received.append(s), task.cancel()))
            except (RuntimeError, ValueError):  # not the main thread: the handler stays as it is
                continue
            restore[signum] = handler
        try:
            return await main()
        finally:
            for signum, handler in restore.items():
                loop.remove_signal_handler(signum)  # resets to SIG_DFL: put the process's handler back
                signal.signal(signum, handler)

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        if not received:
            raise
        handler = signal.getsignal(received[0])
        if callable(handler):
            handler(received[0], None)  # the process's own answer (it raises for the image's SIGTERM)
        raise


def record_before(signum: int, record: Callable[[int], None]) -> None:
    """Have the current Python handler of `signum` call `record(signum)` first.

    For a framework that installs its own handler (Ray's driver: `sys.exit(signum)`) and may
    then end the process before the caller's failure path runs: `record` says what happened
    while the process still can. Only from the main thread, and only over a callable handler.
    """
    current = signal.getsignal(signum)
    if not callable(current):
        return

    def recording(sig, frame):
        record(sig)
        current(sig, frame)

    try:
        signal.signal(signum, recording)
    except ValueError:  # not the main thread: nothing to chain here
        pass
