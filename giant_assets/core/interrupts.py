"""Run an event loop so that Ctrl-C (SIGINT) is never taken for a failed socket write.

A Python SIGINT handler runs between two bytecodes of the main thread, wherever that thread is. Inside an
event loop that may be asyncio's own transport code: a socket ``send`` guarded by ``except BaseException``,
which takes what the handler raises for a failed write, closes that connection and goes on. The loop's
client retries the request and the batch finishes as if nobody had pressed Ctrl-C. ``asyncio.run``
guards against this only for Python's default handler; Dagster replaces it while a step runs (its handler
raises ``DagsterExecutionInterruptedError``), so a cell's batch under ``dagster asset materialize`` lost
a Ctrl-C whenever the signal landed in a write (seen in tests/platform/test_resume.py).

``run_interruptible`` runs the handler in place at the loop's next turn instead (``add_signal_handler``).
If it raises, the main task is cancelled (the batch ends as on any cancellation: journaled runs are
kept, runs in flight are not journaled) and the handler's exception is raised once the loop has closed.
A handler that only records the signal (Dagster's while interrupts are held) is left to do just that.

The platform's event loops that run inside Dagster (a cell's batch, the pictures' re-rendered views, the
batch sensor's polls) go through it; the CLIs' loops run under Python's own handler, which
``asyncio.run`` already guards.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_interruptible(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, the SIGINT handler in place run by the loop rather than inside its code."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        return asyncio.run(main)  # no Python handler runs here (another thread, SIG_IGN, SIG_DFL)
    raised: list[BaseException] = []

    async def guarded() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            try:
                previous(signal.SIGINT, None)
            except BaseException as exc:  # noqa: BLE001 - the handler's way to interrupt: raised below
                if not raised and task is not None:
                    raised.append(exc)
                    task.cancel()

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            return await main
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, previous)

    try:
        result = asyncio.run(guarded())
    except asyncio.CancelledError:
        if raised:
            raise raised[0] from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if raised:  # the batch took the cancellation and returned: still interrupted
        raise raised[0]
    return result
