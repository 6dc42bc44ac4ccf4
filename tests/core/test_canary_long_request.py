"""A long request on each engine's real ``/metrics`` (the golden shapes of
tests/fixtures/dialects/long_request.py, read from the wheels): healthy, it
is no throughput collapse, a canary round that waits behind it is ``busy``
and the lane's decode rate is the engine's; hung mid-request, it collapses
and two failed rounds are ``unresponsive``. SGLang 0.5.23 counts
``prompt_tokens_total``/``generation_tokens_total`` only when a request
finishes, so the rules read its per-step ``realtime_tokens_total``."""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.long_request import CHECK_S, DECODE_TPS, READS, SHAPES
from sparktui.adapters.engine_http import parse_metrics
from sparktui.core.canary import (
    COLLAPSE_AFTER_S,
    CanaryAnswer,
    ThroughputWatch,
    counters_from_metrics,
    decode_tokens,
    judge_canary,
)

TIMEOUT = "no answer in 10 s"
DIALECTS = sorted(SHAPES)


def reads(texts: tuple[str, ...]) -> list[dict[str, float]]:
    return [parse_metrics(t) for t in texts]


def test_sglang_finish_only_counters_stand_still_through_a_long_request() -> None:
    """The trap, in the golden shape: what SGLang calls prompt and generation
    tokens does not move while the request decodes; its step counter does."""
    got = reads(SHAPES["sglang-0.5"].healthy)
    for key in ("sglang:prompt_tokens_total", "sglang:generation_tokens_total"):
        assert len({m[key] for m in got}) == 1
    steps = [m["sglang:realtime_tokens_total"] for m in got]
    assert steps == sorted(steps) and steps[0] < steps[-1]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_healthy_long_request_is_no_collapse(dialect: str) -> None:
    watch = ThroughputWatch()
    for i, m in enumerate(reads(SHAPES[dialect].healthy)):
        c = counters_from_metrics(i * CHECK_S, m)
        assert c.running == 1
        assert watch.observe(c) is None, (dialect, i)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_engine_hung_mid_request_collapses_within_the_window(dialect: str) -> None:
    watch = ThroughputWatch()
    m = parse_metrics(SHAPES[dialect].hung)
    got = [watch.observe(counters_from_metrics(i * CHECK_S, m)) for i in range(READS)]
    first = next(i for i, c in enumerate(got) if c is not None)
    assert first * CHECK_S == COLLAPSE_AFTER_S
    collapse = got[first]
    assert collapse is not None and collapse.running == 1


def canary_round(before: dict[str, float], after: dict[str, float], at: float) -> CanaryAnswer:
    """A round that timed out: /metrics read 4 s before it and 12 s into it;
    neither engine answers its headers while the only slot decodes the long
    request (the simulated one serves one at a time; a real one may well
    answer, which is ``serving``)."""
    return CanaryAnswer("ok", False, None, TIMEOUT, counters_from_metrics(at - 4.0, before),
                        counters_from_metrics(at + 12.0, after), sent_at=at, lag_s=0.01)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_round_behind_a_long_request_is_busy_and_one_behind_a_hang_is_dead(
        dialect: str) -> None:
    healthy = reads(SHAPES[dialect].healthy)
    failed = 0
    for n in range(4):
        v = judge_canary(canary_round(healthy[2 * n], healthy[2 * n + 3], 17.0 * n), failed)
        assert v is not None and v.state == "busy", (dialect, v)
        assert "busy, not dead" in v.evidence[1]
        failed = failed + 1 if v.dead_evidence else 0
    hung = parse_metrics(SHAPES[dialect].hung)
    states, failed = [], 0
    for n in range(2):
        v = judge_canary(canary_round(hung, hung, 17.0 * n), failed)
        assert v is not None
        failed = failed + 1 if v.dead_evidence else 0
        states.append(v.state)
    assert states == ["slow", "unresponsive"]
    assert v is not None and "no token processed in 16 s (1 running, 0 waiting" in v.evidence[1]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_decode_rate_is_the_engines_own_while_it_decodes(dialect: str) -> None:
    got = [decode_tokens(m) for m in reads(SHAPES[dialect].healthy)]
    tokens = [t for t in got if t is not None]
    assert len(tokens) == READS
    assert {round((b - a) / CHECK_S, 6) for a, b in pairwise(tokens)} == {DECODE_TPS}
