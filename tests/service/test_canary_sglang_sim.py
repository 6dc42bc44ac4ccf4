"""A long SGLang request through the console's service against the simulator
(manual clock, real SSH and HTTP). The simulated SGLang counts
``prompt_tokens_total``/``generation_tokens_total`` only when a request
finishes, as SGLang 0.5.23 does (``observability/metrics_collector.py:2109``),
and its per-step ``realtime_tokens_total`` as it goes (``metrics_reporter.py:810``,
``:912``): minutes of healthy decode raise no UNRESPONSIVE and no throughput
collapse, and the lane's decode rate is read while it decodes; the same
request on a scheduler that hangs midway still raises ``unresponsive``
within one canary interval and a collapse."""

from __future__ import annotations

from pathlib import Path

from .simnight import Night, advance_until, boot_unwatched, night, phase

LANE = "dsv41-flash-sglang-4x"
CLUSTER = "4nodes-switch"
DECODE_S = 420.0
"""How long the long request decodes: seven minutes, seven canary intervals."""
BOUND_S = 8 * 3600.0
"""Simulated time allowed for what a hung SGLang's endpoint checks find: each
check's /health waits out its bound in *real* seconds (3 s, the adapter's)
while the manual clock runs ahead by hundreds of simulated seconds per real
one, so a handful of checks can span simulated hours on a loaded host."""


def stalls(n: Night) -> list[str]:
    """Every throughput collapse the canary hands the thrash detector."""
    seen: list[str] = []
    detector = n.service.detector
    forward = detector.on_engine_stall

    def spy(node: str, text: str) -> None:
        seen.append(text)
        forward(node, text)

    detector.on_engine_stall = spy  # type: ignore[method-assign]
    return seen


async def serving(n: Night) -> None:
    await boot_unwatched(n, LANE)
    await n.service.start(n.record)
    await advance_until(n, lambda: phase(n, LANE) == "serving", step=5.0, max_sim_s=120,
                        why=lambda: phase(n, LANE))
    await advance_until(n, lambda: bool(n.service.lanes()[LANE].canary), step=2.0,
                        max_sim_s=2 * n.config.console.canary_interval_s)
    assert "1-token completion answered" in n.service.lanes()[LANE].canary[0]


async def test_a_long_healthy_sglang_request_raises_no_alarm(tmp_path: Path) -> None:
    async with night(tmp_path, "normal", CLUSTER, start=False, poll_interval_s=60.0) as n:
        seen = stalls(n)
        await serving(n)
        engine = n.sim.lane_rank0(LANE)
        finished = engine.stats.finished[:]
        req = n.sim.run_prompt(LANE, 6000, max_tokens=int(engine.decode_tps() * DECODE_S))
        started = n.sim.clock.monotonic()
        states: set[str] = set()
        rates: list[float] = []

        def done() -> bool:
            view = n.service.lanes()[LANE]
            if view.canary:
                states.add(view.canary[-1])
            if view.decode_tps:
                rates.append(view.decode_tps)
            return req.done

        await advance_until(n, done, step=2.0, max_sim_s=2 * DECODE_S)
        assert n.sim.clock.monotonic() - started >= DECODE_S
        # SGLang's own counters stood still the whole time (the trap)
        assert engine.stats.finished[:len(finished)] == finished
        assert not n.alerts("canary:"), n.alerts("canary:")
        assert not n.alerts("thrash:")
        assert seen == []
        assert phase(n, LANE) == "serving"
        assert any("busy, not dead" in s for s in states), states  # rounds behind it
        assert rates and max(rates) >= 0.8 * engine.decode_tps(), (rates, engine.decode_tps())


async def test_an_sglang_scheduler_hung_mid_request_is_still_unresponsive(
        tmp_path: Path) -> None:
    """Its ``/health`` (a generation) gives no answer, which the lane's health
    rule calls unresponsive (HUNG_HEALTH_CHECKS checks with the step counters
    standing still: ~30 s on a real clock;
    here each check's HTTP bound is real seconds while the manual clock runs
    ahead, so no bound on simulated time is asserted); its ``/metrics`` still
    answers, frozen with the request running: a throughput collapse."""
    async with night(tmp_path, "engine-dead", CLUSTER, start=False, poll_interval_s=60.0) as n:
        seen = stalls(n)
        await serving(n)
        engine = n.sim.lane_rank0(LANE)
        req = n.sim.run_prompt(LANE, 6000, max_tokens=int(engine.decode_tps() * 3600))
        await advance_until(n, lambda: engine.core_dead, step=10.0, max_sim_s=900)
        assert not req.done and req.first_token_t > 0  # hung while it decodes
        assert not n.alerts("canary:") and seen == []
        await advance_until(n, lambda: bool(n.alerts("canary:")), step=2.0,
                            max_sim_s=BOUND_S, why=lambda: str(n.service.lanes()[LANE]))
        _, raised = n.alerts("canary:")[0]
        assert raised.alert.level == "unresponsive" and raised.alert.subject == LANE
        # the health rule's words, or (a round already under way when it hung,
        # on a loaded host whose checks lag) the round's: no token, one running
        assert any("gives no answer to /health on 3 checks in a row" in e
                   or "no token processed in" in e for e in raised.alert.evidence), \
            raised.alert.evidence
        await advance_until(n, lambda: bool(seen), step=2.0, max_sim_s=BOUND_S)
        assert "no token processed for" in seen[0] and "1 request(s) running" in seen[0]
