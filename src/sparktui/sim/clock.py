"""The simulator's clock: simulated seconds that run `speed` times faster than
real time, or stand still until a test advances them (manual mode).

It satisfies `core.clock.Clock`, so production code under test can be given
the same clock the simulated cluster runs on.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

# 2026-11-29T22:00:00Z: the simulated night starts here unless told otherwise.
DEFAULT_EPOCH = 1795989600.0


class SimClock:
    """Simulated time. `speed=None` is manual mode: time moves only in `advance`."""

    def __init__(self, *, speed: float | None = None, epoch: float = DEFAULT_EPOCH) -> None:
        if speed is not None and speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.epoch = epoch
        self._now = 0.0
        self._real0 = time.monotonic()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._on_advance: list[Callable[[float], Awaitable[None]]] = []

    @property
    def manual(self) -> bool:
        return self.speed is None

    def monotonic(self) -> float:
        """Simulated seconds since the simulator started."""
        if self.speed is None:
            return self._now
        return (time.monotonic() - self._real0) * self.speed

    def time(self) -> float:
        return self.epoch + self.monotonic()

    async def sleep(self, seconds: float) -> None:
        if self.speed is not None:
            await asyncio.sleep(max(0.0, seconds) / self.speed)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + max(0.0, seconds), next(self._seq), fut))
        await fut

    def next_deadline(self) -> float | None:
        """Manual mode: the simulated time the earliest sleeper wakes at, if any."""
        return self._sleepers[0][0] if self._sleepers else None

    def on_advance(self, hook: Callable[[float], Awaitable[None]]) -> None:
        """Run `hook(now)` at every step of a manual advance (the simulator's update)."""
        self._on_advance.append(hook)

    async def advance(self, seconds: float, *, step: float = 1.0, drain: bool = False,
                      whole_steps: bool = False) -> None:
        """Manual mode: move time forward, in steps of at most `step` seconds,
        waking sleepers in deadline order and letting woken tasks run.

        ``whole_steps``: time stops only every `step` seconds, not at each
        sleeper's deadline; the sleepers due within a step wake together at
        its end, in deadline order (late by less than a step, as on a busy
        host). For coarse steps through a quiet stretch: a watcher ticking
        every simulated second then costs one wake-up per step, not one per
        second.

        ``drain``: at each stop, wait until the event loop is idle (see
        `loop_idle`) rather than a few loop turns, twice: once the simulated
        world has moved (an engine's answer it finished by then reaches its
        client before a timer due by then fires) and once the woken sleepers
        ran (their SSH and HTTP exchanges with the simulated nodes finish
        before time moves on), however loaded the host is. With
        ``whole_steps`` it makes coarse steps safe for bounds on this clock."""
        if self.speed is not None:
            raise RuntimeError("advance() is only for a manual clock")
        target = self._now + max(0.0, seconds)
        while True:
            nxt = min(target, self._now + step)
            if not whole_steps and self._sleepers and self._sleepers[0][0] < nxt:
                nxt = self._sleepers[0][0]
            self._now = max(self._now, nxt)
            for hook in self._on_advance:
                await hook(self._now)
            if drain:  # what the simulated world finished by now is answered before timers fire
                await loop_idle()
            while self._sleepers and self._sleepers[0][0] <= self._now:
                _, _, fut = heapq.heappop(self._sleepers)
                if not fut.done():
                    fut.set_result(None)
            await (loop_idle() if drain else _let_run())
            if self._now >= target:
                return

    async def step_until(self, predicate: Callable[[], object], *, step: float,
                         max_s: float, pace: float | None = None,
                         why: Callable[[], str] = lambda: "") -> None:
        """Manual mode: advance in whole, drained steps of ``step`` seconds
        until ``predicate()`` holds (checked once each step's work is done);
        AssertionError after ``max_s`` seconds. How many simulated seconds
        that takes does not depend on how busy the host is.

        ``pace``: at most this many simulated seconds per real second, for a
        wait that only real time ends (a hung node's SSH probe fails after its
        real timeout). A loaded host slows the pace, never speeds it."""
        loop = asyncio.get_running_loop()
        start, real0 = self._now, loop.time()
        await loop_idle()
        while not predicate():
            spent = self._now - start
            if spent >= max_s:
                raise AssertionError(f"not reached in {max_s:g} simulated s: {why()}")
            if pace is not None and (ahead := spent / pace - (loop.time() - real0)) > 0:
                await asyncio.sleep(ahead)
            await self.advance(step, step=step, drain=True, whole_steps=True)


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor under a manual clock, counting its jobs in
    flight. Libraries hop to a thread on the way to a connection -- asyncssh
    builds its connection options in one, every ``loop.getaddrinfo`` (httpx's
    connects) runs in one -- and a drained step that took such a hop for a
    quiet loop moved simulated time on while the reconnect was still being
    made: on a loaded host 120 simulated seconds passed before a follower's
    SSH reconnect came back, and a dead engine was never seen."""

    def __init__(self) -> None:
        super().__init__(thread_name_prefix="sim-executor")
        self._count_lock = threading.Lock()
        self.in_flight = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._count_lock:
            self.in_flight += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._done(None)
            raise
        future.add_done_callback(self._done)
        return future

    def _done(self, _: object) -> None:
        with self._count_lock:
            self.in_flight -= 1


def count_thread_hops(loop: asyncio.AbstractEventLoop) -> None:
    """Give ``loop`` a default executor that `loop_idle` can see the work of."""
    if not isinstance(getattr(loop, "_default_executor", None), CountingExecutor):
        loop.set_default_executor(CountingExecutor())


async def loop_idle(quiet_turns: int = 3, max_real_s: float = 2.0) -> None:
    """Return once the running loop has had ``quiet_turns`` turns in a row with
    no callback ready and no file descriptor ready: every exchange between
    tasks of this process (a simulated node's SSH server and its client, an
    engine's HTTP server and the checker) has gone as far as it can without
    time passing. Waits on real time (a timeout, a thread, another process)
    are not work and do not hold it up. Gives up after ``max_real_s`` of real
    time (a task that never stops scheduling itself). A job in the loop's
    default executor is work when it is a `CountingExecutor`
    (`count_thread_hops`, which the simulator installs in manual mode): a
    library's hop to a thread on the way to a connection. Reads private
    attributes of asyncio's selector loop; on any other loop it only lets
    woken tasks run a few turns."""
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)
    selector = getattr(loop, "_selector", None)
    if ready is None or selector is None:
        await _let_run()
        return
    executor = getattr(loop, "_default_executor", None)
    counting = executor if isinstance(executor, CountingExecutor) else None
    end = time.monotonic() + max_real_s
    quiet = 0
    while quiet < quiet_turns and time.monotonic() < end:
        if counting is not None and counting.in_flight:
            quiet = 0
            await asyncio.sleep(0.001)  # a thread's job: its answer comes through the loop
            continue
        await asyncio.sleep(0)
        quiet = 0 if ready or selector.select(0) else quiet + 1


async def _let_run(rounds: int = 5) -> None:
    """Give woken tasks a few loop iterations to reach their next await."""
    for _ in range(rounds):
        await asyncio.sleep(0)
