"""judge_canary on an engine core that hung while idle (the golden shapes of
tests/fixtures/dialects/hung_core.py, read from the wheels) and on the
healthy look-alikes it must never alarm: an idle healthy engine that answers
slowly, a loaded console host whose request never got an answer started, a
busy engine whose tokens move."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.hung_core import SHAPES
from sparktui.adapters.engine_http import parse_metrics
from sparktui.core.canary import (
    FAILED_ROUNDS,
    LOOP_LAG_MAX_S,
    STEP_SEEN_S,
    CanaryAnswer,
    EngineCounters,
    counters_from_metrics,
    judge_canary,
)

TIMEOUT = "no answer in 10 s"


def rounds(answers: list[CanaryAnswer]) -> list[str]:
    """The states of consecutive rounds, counting failed-with-evidence rounds
    as the canary does."""
    failed, out = 0, []
    for a in answers:
        v = judge_canary(a, failed)
        assert v is not None
        failed = failed + 1 if v.dead_evidence else 0
        out.append(v.state)
    return out


def hung_round(shape: str, start: float) -> CanaryAnswer:
    """One round against the golden shape: /metrics read 4 s before it and
    12 s into it (the lane's endpoint checks), the same text both times."""
    s = SHAPES[shape]
    metrics = parse_metrics(s.metrics)
    before = counters_from_metrics(start - 4.0, metrics)
    after = counters_from_metrics(start + 12.0, metrics)
    return CanaryAnswer("ok", False, None, TIMEOUT, before, after, sent_at=start,
                        accepted_at=start + 0.02 if s.headers else None, lag_s=0.01)


@pytest.mark.parametrize("shape", ["vllm-0.33", "vllm-0.11"])
def test_a_vllm_core_hung_idle_is_unresponsive_after_two_rounds(shape: str) -> None:
    got = rounds([hung_round(shape, 0.0), hung_round(shape, 17.0)])
    assert got == ["slow", "unresponsive"]
    v = judge_canary(hung_round(shape, 17.0), FAILED_ROUNDS - 1)
    assert v is not None and v.evidence[1].startswith("the API server took it (headers 200")
    assert "no token processed and no engine step in 12 s (0 running, 0 waiting" in \
        v.evidence[1]


def test_an_sglang_scheduler_hung_idle_gives_no_headers_and_its_health_tells() -> None:
    """SGLang answers no headers (its handler waits for the first chunk): the
    round alone is no evidence; its /health gives no answer, which the
    lane's health rule (judge_health) calls unresponsive."""
    assert SHAPES["sglang-0.5"].health_status is None
    got = rounds([hung_round("sglang-0.5", 17.0 * i) for i in range(5)])
    assert got == ["slow"] * 5
    v = judge_canary(hung_round("sglang-0.5", 0.0), 0)
    assert v is not None and "no answer began (no response headers)" in v.evidence[1]


def counters(at: float, tokens: float, running: int = 0, waiting: int = 0) -> EngineCounters:
    return EngineCounters(at, tokens, running, waiting)


times = st.floats(0.0, 1e6, allow_nan=False)


@given(start=times, latency=st.floats(0.01, 10.0), tokens=st.floats(0, 1e7),
       failed_before=st.integers(0, 5))
def test_an_idle_healthy_engine_that_answers_slowly_is_serving(
        start: float, latency: float, tokens: float, failed_before: int) -> None:
    a = CanaryAnswer("ok", True, latency, "", counters(start - 3, tokens),
                     counters(start + 5, tokens + 9), sent_at=start,
                     accepted_at=start + latency / 2, lag_s=5.0)
    v = judge_canary(a, failed_before)
    assert v is not None and v.state == "serving" and not v.dead_evidence


@given(start=times, tokens=st.floats(0, 1e7), late=st.floats(2.0, 60.0),
       lag=st.one_of(st.none(), st.floats(0.0, 30.0)), failed_before=st.integers(0, 5),
       error=st.sampled_from([TIMEOUT, "no complete answer in 10 s", "ReadTimeout: "]))
def test_a_loaded_host_whose_request_got_no_headers_is_never_dead_evidence(
        start: float, tokens: float, late: float, lag: float | None, failed_before: int,
        error: str) -> None:
    """Nothing queued, no headers within the bound: whatever else, slow."""
    a = CanaryAnswer("ok", False, None, error, counters(start - 4, tokens),
                     counters(start + late, tokens), sent_at=start, accepted_at=None,
                     lag_s=lag)
    v = judge_canary(a, failed_before)
    assert v is not None and v.state == "slow" and not v.dead_evidence


@given(start=times, tokens=st.floats(0, 1e7), accepted=st.floats(0.0, 9.0),
       after=st.floats(0.0, 30.0), lag=st.floats(0.0, 5.0),
       queue=st.sampled_from([(0, 0), (1, 0), (0, 2), (3, 1)]),
       failed_before=st.integers(0, 5))
def test_a_hung_idle_core_is_dead_evidence_exactly_when_it_is_seen_not_stepping(
        start: float, tokens: float, accepted: float, after: float, lag: float,
        queue: tuple[int, int], failed_before: int) -> None:
    """Accepted, nothing queued and /metrics unchanged is evidence only with a
    /metrics read STEP_SEEN_S after the headers and the console's loop on time;
    ``unresponsive`` after FAILED_ROUNDS such rounds."""
    b = counters(start - 4, tokens)
    a_at = start + accepted + after
    ans = CanaryAnswer("ok", False, None, TIMEOUT, b, counters(a_at, tokens, *queue),
                       sent_at=start, accepted_at=start + accepted, lag_s=lag)
    v = judge_canary(ans, failed_before)
    assert v is not None
    if queue != (0, 0):
        # the engine's queue changed with no token: the old rule (queued, flat) judges
        assert v.dead_evidence
        return
    seen = after >= STEP_SEEN_S and lag <= LOOP_LAG_MAX_S
    assert v.dead_evidence == seen, v
    expected = ("unresponsive" if failed_before + 1 >= FAILED_ROUNDS else "slow")
    assert v.state == (expected if seen else "slow")


@given(start=times, tokens=st.floats(0, 1e7), moved=st.floats(1.0, 1e4),
       running=st.integers(0, 8), waiting=st.integers(0, 8),
       accepted=st.one_of(st.none(), st.floats(0.0, 9.0)), failed_before=st.integers(0, 5))
def test_a_busy_engine_whose_tokens_move_is_busy(
        start: float, tokens: float, moved: float, running: int, waiting: int,
        accepted: float | None, failed_before: int) -> None:
    a = CanaryAnswer("ok", False, None, TIMEOUT, counters(start - 4, tokens, running, waiting),
                     counters(start + 12, tokens + moved, running, waiting), sent_at=start,
                     accepted_at=None if accepted is None else start + accepted, lag_s=0.0)
    v = judge_canary(a, failed_before)
    assert v is not None and v.state == "busy" and not v.dead_evidence


def test_the_queue_or_counters_changing_with_nothing_queued_is_a_stepping_engine() -> None:
    """Accepted and nothing queued after, but a request left meanwhile (its
    running gauge fell): the core stepped, whatever the tokens say."""
    b, a = counters(0, 500, running=1), counters(16, 500)
    v = judge_canary(CanaryAnswer("ok", False, None, TIMEOUT, b, a, sent_at=4.0,
                                  accepted_at=4.1, lag_s=0.0), 1)
    assert v is not None and v.state == "slow" and not v.dead_evidence
    assert "changed meanwhile" in v.evidence[1]
