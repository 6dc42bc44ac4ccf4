"""The serving canary of one lane: a tiny completion every ``interval_s``
while the lane serves, and every endpoint check's ``/metrics`` through the
throughput-collapse rule (rules in core/canary.py).

A collapse is handed to the thrash detector as engine evidence for every
node of the lane (it escalates memory pressure there to *suspected*, the
same way vLLM's zero-throughput stats lines do), so it is raised while the
node still answers SSH. A canary verdict change goes to ``on_verdict``.
The lane's watch owns the task that runs `ServingCanary.run`.

A round records, on the watcher's clock, when its completion was sent and
when the engine's answer began (:func:`note_accepted`, which the completer
calls when the response's headers come: the round's own bound may cancel the
completion, and what it saw before must survive that), and how late the
round's own timers (its bound, its settling) fired: this console's loop lag.
core/canary.py's judge_canary reads a core that hung idle from them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Protocol

from sparktui.adapters.engine_http import ChatAnswer, EngineClient, Samples
from sparktui.core.canary import (
    NO_ANSWER,
    CanaryAnswer,
    CanaryVerdict,
    Collapse,
    ThroughputWatch,
    counters_from_metrics,
    judge_canary,
    judge_health,
    round_period,
    stale_age,
)
from sparktui.core.clock import Clock, within
from sparktui.watch.thrash import ThrashDetector

log = logging.getLogger(__name__)

CANARY_TIMEOUT_S = 10.0
"""Bound of one canary round's completion (a dead engine core never answers)."""


STOP_SETTLE_S = 2.0
"""A failed round is judged this long after it ended, and only if the lane
still serves then: a stop (from this console, or from another process, which
the lane watcher reads from the journal's stop intents on its 1 s tick)
aborts the completion in flight, and that is the stop's doing, not a dead
engine. It delays an unresponsive verdict by as much, never a good one."""

RETRY_S = 5.0
"""After a round that failed with evidence of a dead engine, the next round
comes this soon (not a whole interval later): ``unresponsive`` needs
:data:`~sparktui.core.canary.FAILED_ROUNDS` in a row, and a hung engine must
still be called so within one interval of the hang (rounds come every
:func:`~sparktui.core.canary.round_period`, the interval less that budget)."""

PROMPT = "Say OK."

class Completer(Protocol):
    """One tiny completion to rank 0's engine. It calls :func:`note_accepted`
    when the engine's answer begins (status 200 and headers)."""

    async def __call__(self, node: str, port: int) -> ChatAnswer: ...


class _Round:
    """What one round saw, on the watcher's clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.sent_at = clock.monotonic()
        self.accepted_at: float | None = None
        self.lag_s = 0.0

    def accepted(self) -> None:
        if self.accepted_at is None:
            self.accepted_at = self.clock.monotonic()

    def fired(self, asked: float, seconds: float) -> None:
        """A timer of ``seconds`` set at ``asked`` just fired: how late (the
        loop's lag; a timer never fires early). No timer of its own: a ticker
        would add wake-ups to every simulated night."""
        self.lag_s = max(self.lag_s, self.clock.monotonic() - asked - seconds)

    async def sleep(self, seconds: float) -> None:
        asked = self.clock.monotonic()
        await self.clock.sleep(seconds)
        self.fired(asked, seconds)


_ROUND: ContextVar[_Round | None] = ContextVar("canary_round", default=None)
"""The round in flight in this task (and the tasks it starts: the bound's)."""


def note_accepted() -> None:
    """Called by a :class:`Completer` once the engine's answer began (status
    200, headers): the round in flight records when, even if its bound later
    cancels the completion. Outside a round it does nothing."""
    r = _ROUND.get()
    if r is not None:
        r.accepted()


class ServingCanary:
    def __init__(
        self,
        lane: str,
        *,
        clock: Clock,
        interval_s: float | None,
        complete: Completer | None,
        detector: ThrashDetector | None = None,
        on_verdict: Callable[[CanaryVerdict | None], None] = lambda v: None,
        timeout_s: float = CANARY_TIMEOUT_S,
    ) -> None:
        """``interval_s`` None (the recipe opted out, or ``[console]
        canary_interval_s = 0``) or no ``complete``: no completion rounds;
        metrics and staleness are still followed."""
        self.lane = lane
        self._clock = clock
        self.interval_s = interval_s if complete is not None else None
        self.timeout_s = timeout_s
        self.period_s = round_period(self.interval_s, timeout_s, STOP_SETTLE_S, RETRY_S) \
            if self.interval_s is not None else None
        """Seconds between two rounds (a hang is called within ``interval_s``)."""
        self._complete = complete
        self._detector = detector
        self._on_verdict = on_verdict
        self._throughput = ThroughputWatch()
        self._health = ""
        self.verdict: CanaryVerdict | None = None
        self.collapse: Collapse | None = None
        self._by_health = False
        """The verdict is judge_health's (a /health that gives no answer), not a round's."""
        self.hung_health = 0
        """Endpoint checks in a row (while serving) whose /health gave no answer."""
        self.failed_rounds = 0
        """Rounds in a row that failed with evidence of a dead engine."""
        self.last_good: float | None = None
        """Monotonic time of the last endpoint check that answered ``/health`` 200."""
        self.latency_s: float | None = None
        """Time to the first token of the last round that answered (Prometheus' figure)."""

    def observe(self, health: str, metrics: Mapping[str, float], nodes: Iterable[str],
                serving: tuple[str, int] | None) -> None:
        """One endpoint check of the lane (health and ``/metrics``);
        ``serving`` is rank 0's (node, port) while the lane serves (None while
        it stops: a port closed by a stop is no alarm)."""
        now = self._clock.monotonic()
        self._health = health
        if health == "ok":
            self.last_good = now
        engine_at = metrics.date if isinstance(metrics, Samples) else None
        self.collapse = self._throughput.observe(counters_from_metrics(now, metrics, engine_at))
        moved = self._throughput.moved
        if serving is None:
            self.hung_health = self.failed_rounds = 0
            if self.verdict is not None:
                self._set(None)  # failed or stopping: the lane's phase says so now
        else:
            by_health = judge_health(health, self.hung_health, serving[1], moved)
            self.hung_health = self.hung_health + 1 if health == NO_ANSWER and not moved \
                else 0
            if by_health is not None:
                self._set(by_health)
                self._by_health = True
            elif health != NO_ANSWER and self._by_health:
                self._set(None)  # it answers again: the next round judges
        if self.collapse is not None and self._detector is not None:
            text = f"lane {self.lane}: {self.collapse.describe()}"
            for node in nodes:
                self._detector.on_engine_stall(node, text)

    def stale_s(self, interval_s: float) -> float | None:
        """Age of the last good endpoint answer when older than two intervals."""
        return stale_age(self.last_good, self._clock.monotonic(), interval_s)

    async def run(self, target: Callable[[], tuple[str, int] | None]) -> None:
        """Rounds until cancelled; ``target()`` is rank 0's (node, port) while
        the lane serves, None otherwise (no round then)."""
        if self.interval_s is None:
            return
        while True:
            assert self.period_s is not None
            await self._clock.sleep(RETRY_S if self.failed_rounds else self.period_s)
            where = target()
            if where is None:
                self.failed_rounds = 0
                if self.verdict is not None:
                    self._set(None)
                continue
            if self._health != "ok":
                self.failed_rounds = 0  # the health rule judges (judge_health)
                continue
            before = self._throughput.last
            rnd = _Round(self._clock)
            token = _ROUND.set(rnd)
            try:
                done = await self._bounded(rnd, *where)
                ok = not done.error and bool(done.content or done.reasoning)
                if not ok:
                    await rnd.sleep(STOP_SETTLE_S)
            except Exception as exc:  # a bad answer must not end the canary
                log.warning("canary of %s: %r", self.lane, exc)
                continue
            finally:
                _ROUND.reset(token)
            if ok:
                self.latency_s = done.ttft_s
            elif target() != where:  # the lane left serving meanwhile: no evidence
                self.failed_rounds = 0
                if self.verdict is not None:
                    self._set(None)
                continue
            error = done.error or ("" if ok else "the answer carried no token")
            verdict = judge_canary(CanaryAnswer(
                self._health, ok, done.ttft_s, error, before, self._throughput.last,
                sent_at=rnd.sent_at, accepted_at=rnd.accepted_at, lag_s=rnd.lag_s),
                self.failed_rounds)
            self.failed_rounds = self.failed_rounds + 1 if verdict and verdict.dead_evidence \
                else 0
            self._set(verdict)

    async def _bounded(self, rnd: _Round, node: str, port: int) -> ChatAnswer:
        """The completion, bounded on the watcher's clock as well as by the
        adapter's own timeout (so a simulated night keeps simulated time)."""
        assert self._complete is not None
        asked = self._clock.monotonic()
        try:
            return await within(self._clock, self.timeout_s, self._complete(node, port))
        except TimeoutError:
            rnd.fired(asked, self.timeout_s)
            return ChatAnswer(error=f"no answer in {self.timeout_s:g} s")

    def _set(self, verdict: CanaryVerdict | None) -> None:
        self._by_health = False
        changed = (verdict is None) != (self.verdict is None) or (
            verdict is not None and self.verdict is not None
            and verdict.state != self.verdict.state)
        self.verdict = verdict
        if changed:
            self._on_verdict(verdict)


def completer_for(api_host: Callable[[str], str],
                  timeout_s: float = CANARY_TIMEOUT_S) -> Completer:
    """One tiny completion (1 token, temperature 0) through the engine HTTP
    adapter's chat client, to the first model the engine lists; the answer's
    headers are :func:`note_accepted`."""

    async def complete(node: str, port: int) -> ChatAnswer:
        async with EngineClient(api_host(node), port, timeout=timeout_s) as client:
            models = await client.models()
            if not models:
                return ChatAnswer(error="/v1/models lists no model")
            return await client.chat(models[0], PROMPT, max_tokens=1, timeout=timeout_s,
                                     on_accepted=note_accepted)

    return complete
