"""The simulator's manual clock: a drained step lets the work it started
finish before time moves on, including a library's hop to a thread (asyncssh
builds its connection options in one, ``loop.getaddrinfo`` runs in one)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from sparktui.sim.clock import SimClock, count_thread_hops


async def _hop_then_stamp(clock: SimClock, stamps: list[float]) -> None:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, time.sleep, 0.3)  # a thread slower than a loop turn
    stamps.append(clock.monotonic())


async def test_a_drained_step_waits_for_a_thread_hop() -> None:
    clock = SimClock()
    count_thread_hops(asyncio.get_running_loop())
    stamps: list[float] = []
    task = asyncio.create_task(_hop_then_stamp(clock, stamps))
    await clock.step_until(lambda: stamps, step=1.0, max_s=600)
    await task
    assert stamps == [0.0]  # no simulated second went by while the thread worked


async def test_without_counting_the_hop_is_no_work() -> None:
    """What the simulator had before (and any loop not given the counting
    executor): the step took the thread's wait for an idle loop."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor())
    clock = SimClock()
    stamps: list[float] = []
    task = asyncio.create_task(_hop_then_stamp(clock, stamps))
    await clock.step_until(lambda: stamps, step=1.0, max_s=100_000)
    await task
    assert stamps and stamps[0] >= 1.0
