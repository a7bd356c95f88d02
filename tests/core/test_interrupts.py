"""Ctrl-C during an event loop (core/interrupts.py): the SIGINT handler in place, run by the loop, not
inside code that takes any exception for its own failure (asyncio's socket writes); a raising handler
cancels the main task and its exception comes out; a recording one only records; the handler is put
back. Each test signals its own process, with its own handler installed (restored after)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest

from giant_assets.core.interrupts import run_interruptible


class Interrupted(BaseException):
    """What a raising handler raises (as Dagster's DagsterExecutionInterruptedError during a step)."""


@pytest.fixture
def handler() -> Iterator[Callable[[Callable], None]]:
    before = signal.getsignal(signal.SIGINT)
    yield lambda new: signal.signal(signal.SIGINT, new)
    signal.signal(signal.SIGINT, before)


def raising(signum: int, frame: object) -> None:
    raise Interrupted


async def swallowing_writes(progress: list[int]) -> int:
    """The signal arrives inside a guarded 'write' (as in asyncio's transports): a handler raising there
    is taken for a failed write; the loop goes on to its next turn after each write."""
    swallowed = 0
    for n in range(40):
        try:
            if n == 3:
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.005)  # the write, where the signal is delivered
        except BaseException:  # noqa: BLE001 - what asyncio's _SelectorSocketTransport.write does
            swallowed += 1
        progress.append(n)
        await asyncio.sleep(0)
    return swallowed


def test_plain_asyncio_run_loses_the_interrupt_inside_a_guarded_write(handler) -> None:  # noqa: ANN001
    """The failure mode, shown with asyncio.run: the handler's exception is swallowed, the loop finishes."""
    handler(raising)
    progress: list[int] = []
    assert asyncio.run(swallowing_writes(progress)) == 1 and len(progress) == 40


def test_a_raising_handler_cancels_the_loop_and_its_exception_comes_out(handler) -> None:  # noqa: ANN001
    handler(raising)
    progress: list[int] = []
    with pytest.raises(Interrupted):
        run_interruptible(swallowing_writes(progress))
    assert 4 <= len(progress) < 40  # cancelled at the loop's next turn, nothing swallowed
    assert signal.getsignal(signal.SIGINT) is raising  # put back


def test_ctrl_c_with_pythons_own_handler_is_a_keyboard_interrupt(handler) -> None:  # noqa: ANN001
    handler(signal.default_int_handler)
    progress: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        run_interruptible(swallowing_writes(progress))
    assert len(progress) < 40 and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_recording_handler_only_records(handler) -> None:  # noqa: ANN001
    seen: list[int] = []
    handler(lambda signum, frame: seen.append(signum))
    progress: list[int] = []
    assert run_interruptible(swallowing_writes(progress)) == 0  # nothing raised, nothing swallowed
    assert seen == [signal.SIGINT] and len(progress) == 40


def test_a_batch_that_takes_the_cancellation_and_returns_is_still_interrupted(handler) -> None:  # noqa: ANN001
    handler(raising)

    async def returns_on_cancel() -> str:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "partial"
        return "done"

    started = time.monotonic()
    with pytest.raises(Interrupted):
        run_interruptible(returns_on_cancel())
    assert time.monotonic() - started < 5
