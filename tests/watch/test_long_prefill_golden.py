"""A long SGLang 0.5.23 prompt, from the golden transcript
``sglang05-long-prefill`` (tests/fixtures/dialects/build_transcripts.py:
a 120k-token prompt in 8192-token chunks, one ``Prefill batch`` line per
chunk from ``metrics_reporter.py:753``, then ``Decode batch`` lines from
``:963``), read as the lane watcher reads a serving lane: the phase tracker
keeps it serving through every prefill line (stats, never fatal, never a
stall), and the canary, fed the endpoint checks of those minutes -- SGLang's
``/health`` gives no answer behind a long prompt (``http_server.py:721``,
``:781``) while ``realtime_tokens_total{mode="prefill_compute"}`` moves at
each chunk's report (``metrics_reporter.py:810``) -- calls it ``busy``, never
``unresponsive``, and drops the verdict once ``/health`` answers again with
the first decode tokens. The transcript's boot plays through real sshd as
``ready`` (tests/adapters/test_dialects_openssh.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.golden import scenario
from fixtures.dialects.long_request import CHECK_S, DONE_BEFORE, MODEL
from sparktui.adapters.engine_http import parse_metrics
from sparktui.core.canary import NO_ANSWER
from sparktui.core.logsig import Kind, Phase, classify, parse_timestamp
from sparktui.core.phases import PhaseTracker
from sparktui.sim.clock import SimClock
from sparktui.watch.canary import ServingCanary

NAME = "sglang05-long-prefill"


def lines() -> tuple[dict, list[tuple[float, str]]]:
    meta, ranks = scenario(NAME)
    t0 = parse_timestamp(ranks[0][0][0]) or 0.0
    return meta, [((parse_timestamp(ts) or 0.0) - t0, text) for ts, text in ranks[0]]


def batches(kind: str) -> list[tuple[float, str]]:
    return [(t, text) for t, text in lines()[1] if f"] {kind} batch, " in text]


def test_every_chunk_is_a_prefill_batch_line_with_its_pending_tokens() -> None:
    meta, _ = lines()
    want = meta["expect"]["prefill"]
    prefill = batches("Prefill")
    assert len(prefill) == want["chunks"]
    left = want["prompt"]
    for _, text in prefill:
        ev = classify(text)
        assert ev is not None and ev.kind is Kind.STATS and not ev.fatal, text
        assert ev.fields["batch"] == "Prefill" and ev.fields["running"] == "0", ev.fields
        new = int(text.split("#new-token: ")[1].split(",")[0])
        assert new == min(want["chunk"], left)
        left -= new
        assert f"#pending-token: {left}, " in text and "#token: " not in text, text
    assert left == 0
    decode = batches("Decode")
    assert decode and all((ev := classify(t)) is not None and ev.kind is Kind.STATS
                          and ev.fields["batch"] == "Decode" for _, t in decode)


def test_the_lane_serves_through_the_whole_prefill() -> None:
    _, got = lines()
    tracker = PhaseTracker(NAME, stall_after_s=60.0, start=0.0)
    served = False
    for now, text in got:
        ev = tracker.feed(0, text, now)
        if ev is not None and ev.kind is Kind.API_UP:
            tracker.mark_serving(now)  # readiness confirms the endpoint (watch/readiness.py)
        tracker.check_stall(now)
        served = served or tracker.phase is Phase.SERVING
        if served:
            assert tracker.phase is Phase.SERVING and tracker.failure is None, (now, text)
    assert served
    first, last = batches("Prefill")[0][0], batches("Prefill")[-1][0]
    assert last - first > 100.0  # minutes of prefill, a line every ~9 s
    tracker.check_stall(last + 600.0)  # no stall rule once the endpoint is confirmed
    assert tracker.phase is Phase.SERVING


def metrics_at(t: float) -> str:
    """SGLang's ``/metrics`` at ``t``: the scheduler's realtime counters as
    the transcript's batches moved them (tests/fixtures/dialects/long_request.py's
    series)."""
    prefilled = sum(int(text.split("#new-token: ")[1].split(",")[0])
                    for at, text in batches("Prefill") if at <= t)
    decoded = sum(40 for at, _ in batches("Decode") if at <= t)
    labels = f'model_name="{MODEL}"'
    return "\n".join([
        "# TYPE sglang:num_running_reqs gauge",
        f"sglang:num_running_reqs{{{labels}}} 1.0",
        "# TYPE sglang:num_queue_reqs gauge",
        f"sglang:num_queue_reqs{{{labels}}} 0.0",
        "# TYPE sglang:realtime_tokens_total counter",
        f'sglang:realtime_tokens_total{{{labels},mode="prefill_compute"}} '
        f"{DONE_BEFORE[0] + prefilled}",
        f'sglang:realtime_tokens_total{{{labels},mode="decode"}} {DONE_BEFORE[1] + decoded}',
        ""])


def test_the_canary_calls_it_busy_not_unresponsive_while_prefill_lines_come() -> None:
    prefill = batches("Prefill")
    chunk_s = prefill[1][0] - prefill[0][0]
    start = prefill[0][0] - chunk_s  # the prompt arrives; the first chunk runs
    end = prefill[-1][0]
    clock = SimClock()
    verdicts: list[str | None] = []
    canary = ServingCanary("lane", clock=clock, interval_s=None, complete=None,
                           on_verdict=lambda v: verdicts.append(v.state if v else None))
    seen: list[tuple[float, str, str | None]] = []
    t = start - CHECK_S
    while t < end + 4 * CHECK_S:
        # no answer to /health while the scheduler prefills; the first decode
        # token is output of the scheduler, and /health answers 200 again
        health = NO_ANSWER if start <= t <= end else "ok"
        canary.observe(health, parse_metrics(metrics_at(t)), ["dgx1"], ("dgx1", 30000))
        seen.append((t, health, canary.verdict.state if canary.verdict else None))
        t += CHECK_S
    assert "unresponsive" not in verdicts, seen
    during = [v for at, _, v in seen if prefill[0][0] <= at <= end]
    assert during and all(v == "busy" for v in during), seen
    assert seen[-1][2] is None, seen  # answering again: nothing to say
