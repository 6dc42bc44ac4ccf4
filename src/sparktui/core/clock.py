"""Time as an injectable dependency, so watchers and workflows can be tested
with a simulated clock and run deterministically."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def within(clock: Clock, seconds: float, aw: Awaitable[T]) -> T:
    """``aw`` bounded on ``clock`` rather than the event loop's (so that under
    the simulator's clock a bound is simulated time, as the rest of a watch
    is): its result, or TimeoutError once ``seconds`` passed (``aw`` is then
    cancelled). A cancellation of the caller still reaches the caller."""
    work = asyncio.ensure_future(aw)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        work.cancel()
        raise
    finally:
        timer.cancel()
    if not work.done():
        work.cancel()
        await asyncio.wait({work})  # not awaited itself: our own cancellation must not be eaten
        if not work.cancelled():
            work.exception()  # retrieved: the bound is what is reported
        raise TimeoutError(f"nothing within {seconds:g} s")
    return work.result()
