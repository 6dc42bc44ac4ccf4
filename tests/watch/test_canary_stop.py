"""A stop aborts the canary's completion in flight: that failed round is the
stop's doing and must not call the lane unresponsive (the console would
raise an alert, and the phone ring, for an operator's own stop). A failed
round on a lane that still serves is judged as before."""

from __future__ import annotations

import asyncio

from sparktui.adapters.engine_http import ChatAnswer
from sparktui.core.canary import HUNG_HEALTH_CHECKS, NO_ANSWER, REFUSED, CanaryVerdict
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


def test_a_port_that_accepts_and_never_answers_leaves_serving() -> None:
    """A hung server (the port accepts, /health times out): HUNG_HEALTH_CHECKS
    endpoint checks in a row make the lane unresponsive; fewer are no alarm;
    an answer again clears it. A server that is gone (refused, 503) is the
    lane watcher's to fail, never this rule's."""
    hung = [(NO_ANSWER, True)] * HUNG_HEALTH_CHECKS
    assert health_verdicts([("ok", True), *hung[1:], ("ok", True)]) == \
        [None] * (HUNG_HEALTH_CHECKS + 1)
    assert health_verdicts([("ok", True), *hung, ("ok", True)]) == \
        [None] * HUNG_HEALTH_CHECKS + ["unresponsive", None]
    assert health_verdicts([(REFUSED, True)] * 5 + [("503", True)] * 5) == [None] * 10


def test_a_port_closed_by_a_stop_is_no_alarm() -> None:
    assert health_verdicts([("ok", True), *[(NO_ANSWER, False)] * 5]) == [None] * 6


def test_leaving_serving_clears_the_verdict() -> None:
    """Unresponsive, then the lane fails (or stops): the alert goes with the
    first endpoint check after, not a canary interval later."""
    assert health_verdicts([*[(NO_ANSWER, True)] * HUNG_HEALTH_CHECKS, (NO_ANSWER, False)]) \
        == [None] * (HUNG_HEALTH_CHECKS - 1) + ["unresponsive", None]
