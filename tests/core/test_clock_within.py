"""`core.clock.within`: a bound on an injected clock (the simulator's in
tests), which still lets the caller's own cancellation through."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.core.clock import SystemClock, within
from sparktui.sim.clock import SimClock


async def test_the_result_within_the_bound() -> None:
    async def quick() -> int:
        return 7

    assert await within(SystemClock(), 5.0, quick()) == 7


async def test_the_bound_is_the_clocks_not_the_loops() -> None:
    clock = SimClock()  # manual: time moves only when advanced
    never = asyncio.Event()
    waiting = asyncio.create_task(within(clock, 10.0, never.wait()))
    await asyncio.sleep(0.05)  # real time passes; simulated time does not
    assert not waiting.done()
    await clock.advance(10.0)
    with pytest.raises(TimeoutError, match="nothing within 10 s"):
        await waiting


async def test_the_callers_cancellation_is_not_eaten() -> None:
    started = asyncio.Event()

    async def stubborn() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(within(SystemClock(), 60.0, stubborn()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
