"""A stop aborts the canary's completion in flight: that failed round is the
stop's doing and must not call the lane unresponsive (the console would
raise an alert, and the phone ring, for an operator's own stop). A failed
round on a lane that still serves is judged as before."""

from __future__ import annotations

import asyncio

from sparktui.adapters.engine_http import ChatAnswer
from sparktui.core.canary import CanaryVerdict
from sparktui.watch.canary import ServingCanary

SCALE = 1000.0
"""Simulated seconds per real second."""


class FastClock:
    """Real asyncio time, sped up: ``within`` and sleeps keep their order."""

    def time(self) -> float:
        return 1_764_450_000.0 + self.monotonic()

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time() * SCALE

    async def sleep(self, s: float) -> None:
        await asyncio.sleep(s / SCALE)


async def rounds(stop_during_round: bool) -> list[CanaryVerdict | None]:
    serving = {"on": True}
    verdicts: list[CanaryVerdict | None] = []

    async def complete(node: str, port: int) -> ChatAnswer:
        if stop_during_round:
            serving["on"] = False  # the stop's docker stop lands while the request runs
        return ChatAnswer(error="Server disconnected")

    canary = ServingCanary("lane", clock=FastClock(), interval_s=60.0, complete=complete,
                           on_verdict=verdicts.append)
    canary.observe("ok", {}, ["dgx1"], ("dgx1", 8000))
    task = asyncio.create_task(canary.run(
        lambda: ("dgx1", 8000) if serving["on"] else None))
    await asyncio.sleep(200 / SCALE)  # three rounds and their settling
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return verdicts


async def test_a_round_aborted_by_a_stop_is_no_evidence() -> None:
    assert await rounds(stop_during_round=True) == []


async def test_failed_rounds_on_a_lane_that_still_serves_are_unresponsive() -> None:
    """One failed round is ``slow``; the retry RETRY_S later failing too is
    ``unresponsive`` (FAILED_ROUNDS), long before the next interval."""
    verdicts = await rounds(stop_during_round=False)
    assert [v.state if v else None for v in verdicts] == ["slow", "unresponsive"]


def health_verdicts(checks: list[tuple[str, bool]]) -> list[str | None]:
    """The canary's state after each endpoint check (health, lane serving)."""
    canary = ServingCanary("lane", clock=FastClock(), interval_s=60.0, complete=None)
    out: list[str | None] = []

    async def go() -> None:
        for health, serving in checks:
            canary.observe(health, {}, ["dgx1"], ("dgx1", 8000) if serving else None)
            out.append(canary.verdict.state if canary.verdict else None)

    asyncio.run(go())
    return out


def test_a_port_that_stops_answering_leaves_serving_on_the_second_check() -> None:
    """Closed port (refused) or a dead vLLM 0.33 core (/health 503): two
    endpoint checks in a row (5 s apart) make the lane unresponsive; one
    lost check is no alarm; an answer again clears it."""
    assert health_verdicts([("ok", True), ("refused", True), ("ok", True)]) == [None] * 3
    assert health_verdicts([("ok", True), ("refused", True), ("refused", True),
                            ("ok", True)]) == [None, None, "unresponsive", None]
    assert health_verdicts([("503", True), ("503", True)]) == [None, "unresponsive"]


def test_a_port_closed_by_a_stop_is_no_alarm() -> None:
    assert health_verdicts([("ok", True), ("refused", False), ("refused", False),
                            ("refused", False)]) == [None] * 4
