"""The serving canary's pure rules: metric names, the throughput-collapse
rule, the canary verdict and staleness."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.canary import (
    BAD_HEALTH_CHECKS,
    COLLAPSE_AFTER_S,
    FAILED_ROUNDS,
    HUNG_HEALTH_CHECKS,
    NO_ANSWER,
    REFUSED,
    CanaryAnswer,
    EngineCounters,
    ThroughputWatch,
    counters_from_metrics,
    describe_age,
    endpoint_gone,
    hang_budget,
    judge_canary,
    judge_health,
    round_period,
    stale_age,
)


def c(at: float, tokens: float | None, running: int | None = 1, waiting: int = 0
      ) -> EngineCounters:
    return EngineCounters(at, tokens, running, waiting)


def test_counters_from_vllm_and_sglang_names() -> None:
    v = counters_from_metrics(5.0, {"vllm:prompt_tokens_total": 100.0,
                                    "vllm:generation_tokens_total": 20.0,
                                    "vllm:num_requests_running": 2.0,
                                    "vllm:num_requests_waiting": 1.0})
    assert v == EngineCounters(5.0, 120.0, 2, 1)
    # SGLang: the scheduler's per-step counter; its prompt/generation counters
    # move only when a request finishes (tests/core/test_canary_long_request.py)
    s = counters_from_metrics(1.0, {"sglang:realtime_tokens_total": 40.0,
                                    'sglang:realtime_tokens_total{mode="decode"}': 9.0,
                                    "sglang:generation_tokens_total": 7.0,
                                    "sglang:num_running_reqs": 0.0,
                                    "sglang:num_queue_reqs": 3.0})
    assert s == EngineCounters(1.0, 40.0, 0, 3)
    assert counters_from_metrics(1.0, {"sglang:generation_tokens_total": 7.0,
                                       "sglang:num_running_reqs": 1.0}).tokens is None
    assert counters_from_metrics(0.0, {}) == EngineCounters(0.0, None, None, None)


def test_collapse_needs_requests_running_and_flat_counters_for_the_window() -> None:
    w = ThroughputWatch()
    assert w.observe(c(0, 90)) is None
    assert w.observe(c(5, 100)) is None  # a token between 0 and 5
    assert w.observe(c(20, 100)) is None  # 15 s flat
    got = w.observe(c(25, 100))
    assert got is not None and got.seconds == COLLAPSE_AFTER_S and got.running == 1
    assert "no token processed for 20 s with 1 request(s) running" in got.describe()
    assert w.observe(c(30, 101)) is None  # a token: not collapsed any more


def test_idle_engine_is_no_collapse() -> None:
    w = ThroughputWatch()
    for t in range(0, 200, 5):
        assert w.observe(c(t, 500, running=0)) is None


def test_unknown_counters_reset_the_rule() -> None:
    w = ThroughputWatch()
    w.observe(c(0, 10))
    w.observe(c(10, 10))
    w.observe(c(15, None))
    assert w.observe(c(30, 10)) is None and w.observe(c(45, 10)) is None
    assert w.observe(c(60, 10)) is not None


@given(st.lists(st.tuples(st.floats(0.1, 30), st.integers(0, 3), st.integers(0, 50)),
                min_size=1, max_size=60))
def test_collapse_only_when_flat_with_running_for_the_window(steps) -> None:  # type: ignore[no-untyped-def]
    """Whatever the sequence: a collapse is reported only when the last
    COLLAPSE_AFTER_S seconds of samples all had requests running and no token."""
    w = ThroughputWatch()
    t, tokens = 0.0, 0.0
    seen: list[EngineCounters] = []
    for dt, running, more in steps:
        t += dt
        tokens += more
        sample = c(t, tokens, running)
        seen.append(sample)
        got = w.observe(sample)
        if got is None:
            continue
        window = [s for s in seen if s.at >= got.since]
        assert got.seconds >= COLLAPSE_AFTER_S
        assert all(s.running and s.running > 0 for s in window)
        assert len({s.tokens for s in window}) == 1


def test_canary_verdicts() -> None:
    assert judge_canary(CanaryAnswer("503", False, error="x"), 1) is None
    ok = judge_canary(CanaryAnswer("ok", True, 0.25), 1)
    assert ok is not None and ok.state == "serving" and "0.25 s" in ok.evidence[0]
    hung = CanaryAnswer("ok", False, None, "no answer in 10 s", c(0, 50, 0, 0),
                        c(10, 50, 0, 2))
    first = judge_canary(hung, 0)
    assert first is not None and first.state == "slow" and first.dead_evidence
    dead = judge_canary(hung, FAILED_ROUNDS - 1)
    assert dead is not None and dead.unresponsive
    assert dead.evidence == ("/health answers 200 but a 1-token completion failed: no answer "
                             "in 10 s", "no token processed in 10 s (0 running, 2 waiting, "
                             "/metrics)", f"{FAILED_ROUNDS} rounds in a row")
    busy = judge_canary(CanaryAnswer("ok", False, None, "no answer in 10 s",
                                     c(0, 50), c(10, 8242)), 5)
    assert busy is not None and busy.state == "busy" and "8192 tokens" in busy.evidence[1]
    assert not busy.dead_evidence
    fast_fail = CanaryAnswer("ok", False, 0.1, "HTTP 500: EngineDeadError", c(0, 50), c(0, 50))
    v = judge_canary(fast_fail, 0)
    assert v is not None and v.state == "slow" and v.dead_evidence
    v = judge_canary(fast_fail, FAILED_ROUNDS - 1)
    assert v is not None and v.unresponsive


def test_an_idle_lane_with_a_slow_answer_is_never_unresponsive() -> None:
    """The night's false alarm: a 1-token answer late on a loaded host, the
    engine idle (0 running, 0 waiting): the request never reached it."""
    idle = CanaryAnswer("ok", False, None, "no answer in 10 s", c(0, 50, 0, 0), c(13, 50, 0, 0))
    for before in range(10):
        v = judge_canary(idle, before)
        assert v is not None and v.state == "slow" and not v.dead_evidence
        assert "nothing queued" in v.evidence[1]
    blind = CanaryAnswer("ok", False, None, "no answer in 10 s")
    v = judge_canary(blind, 9)
    assert v is not None and v.state == "slow" and not v.dead_evidence


def test_staleness_shows_past_two_intervals() -> None:
    assert stale_age(None, 100.0, 2.0) is None
    assert stale_age(96.0, 100.0, 2.0) is None
    assert stale_age(95.0, 100.0, 2.0) == 5.0
    assert describe_age(7.2) == "last good sample 7s ago"
    assert describe_age(252) == "last good sample 4m12s ago"


def test_a_server_that_is_gone_fails_the_lane_on_the_second_check() -> None:
    """vLLM 0.33: a dead core answers /health 503, then its server exits (the
    port refuses): both are the engine gone, on BAD_HEALTH_CHECKS in a row."""
    assert endpoint_gone("ok", 5, 8000) is None
    assert endpoint_gone(REFUSED, BAD_HEALTH_CHECKS - 2, 8000) is None
    assert endpoint_gone(REFUSED, BAD_HEALTH_CHECKS - 1, 8000) == (
        f"port 8000 refuses connections (the API server is gone) on {BAD_HEALTH_CHECKS} "
        "checks in a row")
    assert endpoint_gone("503", BAD_HEALTH_CHECKS - 1, 8000) == (
        f"/health answers HTTP 503 on {BAD_HEALTH_CHECKS} checks in a row")
    # a /health that times out says nothing of an exit, however long it lasts
    assert all(endpoint_gone(NO_ANSWER, n, 8000) is None for n in range(20))


def test_a_port_that_accepts_and_never_answers_is_unresponsive() -> None:
    assert judge_health("ok", 9, 8000) is None
    assert judge_health(REFUSED, 9, 8000) is None  # gone: endpoint_gone's, not this
    assert judge_health(NO_ANSWER, HUNG_HEALTH_CHECKS - 2, 8000) is None
    v = judge_health(NO_ANSWER, HUNG_HEALTH_CHECKS - 1, 8000)
    assert v is not None and v.unresponsive
    assert v.evidence == (f"port 8000 gives no answer to /health on {HUNG_HEALTH_CHECKS} "
                          "checks in a row",)


def test_no_answer_to_health_while_the_step_counters_move_is_busy() -> None:
    """SGLang's /health (a generation) waits behind a long prompt's chunks,
    which move its step counter (tests/fixtures/dialects/long_request.py)."""
    for before in range(20):
        v = judge_health(NO_ANSWER, before, 30000, moved=True)
        assert v is not None and v.state == "busy" and not v.dead_evidence
    assert judge_health("ok", 9, 30000, moved=True) is None


def test_a_step_counter_moved_is_its_last_sample_against_the_one_before() -> None:
    w = ThroughputWatch()
    w.observe(c(0, None))
    assert not w.moved
    w.observe(c(5, 100))
    assert not w.moved  # nothing to compare with
    w.observe(c(10, 108))
    assert w.moved
    w.observe(c(15, 108))
    assert not w.moved
    w.observe(c(20, None))
    assert not w.moved


@given(st.floats(1.0, 3600.0), st.floats(0.5, 30.0), st.floats(0.0, 5.0), st.floats(0.5, 30.0))
def test_rounds_come_often_enough_to_call_a_hang_within_the_interval(
        interval: float, timeout: float, settle: float, retry: float) -> None:
    """The worst hang starts just after a round: the next round begins one
    period later and FAILED_ROUNDS bounded rounds (and the retries between
    them) decide; that fits the interval whenever the interval can hold it."""
    period = round_period(interval, timeout, settle, retry)
    budget = hang_budget(timeout, settle, retry)
    assert budget >= FAILED_ROUNDS * (timeout + settle) + (FAILED_ROUNDS - 1) * retry
    assert interval / 2 <= period <= interval
    if interval >= 2 * budget:
        assert period + budget <= interval + 1e-9


@settings(max_examples=200, deadline=None)
@given(speed=st.floats(0.3, 100.0), poll=st.floats(0.5, 10.0), epoch=st.floats(1.7e9, 1.9e9))
def test_collapse_window_is_on_the_engines_clock(speed: float, poll: float,
                                                 epoch: float) -> None:
    """The window is seconds of the engine's clock (its /metrics answer's
    ``Date``, whole seconds), whatever clock the watcher stamps samples on
    (``speed``: engine seconds per watcher second): a sentinel on wall time
    beside a simulator at 60x calls a collapse after 20 simulated seconds, not
    20 simulated minutes; a console on a clock that runs ahead, not sooner."""
    w = ThroughputWatch()
    t0 = int(epoch)
    assert w.observe(EngineCounters(0.0, 100.0, 1, 0, float(t0))) is None  # flat from here
    i, got = 0, None
    while got is None:
        i += 1
        got = w.observe(EngineCounters(i * poll, 100.0, 1, 0,
                                       float(int(epoch + i * poll * speed))))
    assert got.seconds == int(epoch + i * poll * speed) - t0 >= COLLAPSE_AFTER_S
    assert int(epoch + (i - 1) * poll * speed) - t0 < COLLAPSE_AFTER_S  # not a sample late


def test_collapse_window_restarts_when_the_clock_changes_or_steps_back() -> None:
    w = ThroughputWatch()
    w.observe(EngineCounters(0.0, 5.0, 1, 0, 1000.0))
    assert w.observe(EngineCounters(1.0, 5.0, 1, 0, 1015.0)) is None
    assert w.observe(EngineCounters(2.0, 5.0, 1, 0, None)) is None  # no Date: other clock
    assert w.observe(EngineCounters(30.0, 5.0, 1, 0, None)) is not None  # 28 s watcher-flat
    assert w.observe(EngineCounters(31.0, 5.0, 1, 0, 1016.0)) is None  # engine clock again
    assert w.observe(EngineCounters(32.0, 5.0, 1, 0, 1000.0)) is None  # stepped back
    assert w.observe(EngineCounters(33.0, 5.0, 1, 0, 1019.0)) is None
    assert w.observe(EngineCounters(34.0, 5.0, 1, 0, 1020.0)) is not None
