"""A hung engine core (``/health`` 200, no token) is ``unresponsive`` within one
canary interval of the hang, even when it hangs at the worst moment (just
after a round answered); an idle lane whose answers are only slow never is.
The canary runs on the simulator's manual clock: every bound is simulated
time, whatever the host's load."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.adapters.engine_http import ChatAnswer
from sparktui.core.canary import CanaryVerdict
from sparktui.sim.clock import SimClock
from sparktui.watch.canary import ServingCanary, note_accepted

INTERVAL_S = 60.0
CHECK_S = 5.0
"""The lane watcher's endpoint checks (LaneWatcher.endpoint_every_s)."""


class Engine:
    """What the canary sees of one engine: its token counter, its queue, and
    whether its core hangs. A hung core is vLLM's (tests/fixtures/dialects/
    hung_core.py): the API server takes the request (its headers come) and the
    core never steps, so /metrics keep the last step's 0 running, 0 waiting."""

    def __init__(self, clock: SimClock, *, slow_s: float = 0.0) -> None:
        self.clock = clock
        self.tokens = 100.0
        self.waiting = 0
        self.hung_at: float | None = None
        self.slow_s = slow_s
        """An idle engine on a loaded host: the request reaches it this late."""
        self.answered: list[float] = []

    async def complete(self, node: str, port: int) -> ChatAnswer:
        if self.hung_at is not None:
            note_accepted()
            await asyncio.Event().wait()  # the bound (CANARY_TIMEOUT_S) ends it
        await self.clock.sleep(self.slow_s)
        note_accepted()
        self.tokens += 8
        self.answered.append(self.clock.monotonic())
        return ChatAnswer(content="OK", ttft_s=0.1)

    def metrics(self) -> dict[str, float]:
        return {"vllm:prompt_tokens_total": self.tokens, "vllm:generation_tokens_total": 0.0,
                "vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": self.waiting}


async def watch(engine: Engine, clock: SimClock, until_s: float,
                hang_after_round: int | None) -> list[tuple[float, CanaryVerdict | None]]:
    verdicts: list[tuple[float, CanaryVerdict | None]] = []
    canary = ServingCanary("lane", clock=clock, interval_s=INTERVAL_S, complete=engine.complete,
                           on_verdict=lambda v: verdicts.append((clock.monotonic(), v)))

    async def checks() -> None:
        while True:
            canary.observe("ok", engine.metrics(), ["dgx1"], ("dgx1", 8000))
            await clock.sleep(CHECK_S)

    tasks = [asyncio.create_task(checks()),
             asyncio.create_task(canary.run(lambda: ("dgx1", 8000)))]
    try:
        while clock.monotonic() < until_s:
            await clock.advance(0.5, step=0.5, drain=True)
            if hang_after_round is not None and engine.hung_at is None \
                    and len(engine.answered) >= hang_after_round:
                engine.hung_at = clock.monotonic()  # just after that round answered
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return verdicts


@pytest.mark.parametrize("after_round", [1, 2])
async def test_a_hang_just_after_a_round_is_called_within_one_interval(after_round: int) -> None:
    clock = SimClock()
    engine = Engine(clock)
    verdicts = await watch(engine, clock, 600.0, after_round)
    assert engine.hung_at is not None
    called = [t for t, v in verdicts if v is not None and v.unresponsive]
    assert called, verdicts
    assert called[0] - engine.hung_at <= INTERVAL_S, (engine.hung_at, verdicts)
    assert all(t >= engine.hung_at for t, v in verdicts if v is not None and v.state != "serving")


async def test_an_idle_lane_with_slow_answers_is_never_unresponsive() -> None:
    """A loaded host: each 1-token answer takes longer than the round's bound,
    the engine idle (nothing queued, no token moving) -- a night of it."""
    clock = SimClock()
    engine = Engine(clock, slow_s=30.0)
    verdicts = await watch(engine, clock, 8 * 3600.0 / 8, None)
    assert [v for _, v in verdicts if v is not None and v.unresponsive] == []
    assert {v.state for _, v in verdicts if v is not None} <= {"slow", "serving"}
