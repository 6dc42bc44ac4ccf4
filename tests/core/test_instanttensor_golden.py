"""The InstantTensor golden transcript (vllm033-v2-instanttensor-pin-2node,
rendered from vLLM 0.33's strings: no logger line of the loader's own, rank
0's tqdm over the bytes, ``model_loader/weight_utils.py:1457-1467``, each
redraw checked against tqdm 4.70.1's ``format_meter``) read by the phase
tracker: its load progress is the bytes read on rank 0, with tqdm's ETA, and
the 48 minutes in which the worker rank prints nothing are not a stall."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.golden import scenario
from sparktui.core.loadprogress import READ
from sparktui.core.logsig import Kind, Phase, classify, parse_timestamp
from sparktui.core.phases import PhaseTracker

NAME = "vllm033-v2-instanttensor-pin-2node"


def lines_until(text: str) -> tuple[PhaseTracker, float]:
    """Both ranks' lines, by docker's time, up to rank 0's first line holding ``text``."""
    _, ranks = scenario(NAME)
    t0 = parse_timestamp(ranks[0][0][0]) or 0.0
    merged = sorted(((parse_timestamp(ts) or 0.0) - t0, rank, ts, body)
                    for rank, lines in ranks.items() for ts, body in lines)
    tracker = PhaseTracker(NAME, stall_after_s=600.0, start=0.0)
    for now, rank, ts, body in merged:
        tracker.feed(rank, body, now, ts=ts)
        if rank == 0 and text in body:
            return tracker, now
    raise AssertionError(f"no {text!r} on rank 0")


def test_the_loaders_only_line_is_rank_0s_byte_bar() -> None:
    _, ranks = scenario(NAME)
    bars = [body for _, body in ranks[0] if "InstantTensor" in body]
    assert len(bars) == 9 and all(b.startswith("\rLoading safetensors using InstantTensor "
                                               "loader: ") for b in bars)
    assert all(getattr(classify(b), "kind", None) is Kind.LOAD_BYTES for b in bars)
    assert not any("InstantTensor" in body or "% Completed" in body for _, body in ranks[1])


def test_its_progress_is_the_bytes_read_with_tqdms_eta() -> None:
    tracker, now = lines_until(" 50% Completed | 175G/350G [24:00<24:00, 131MB/s]")
    assert tracker.phase is Phase.LOADING
    p = tracker.load_progress()
    assert p is not None and p.rank == 0 and p.measure == READ
    assert p.amount() == "175/350G" and p.fraction == pytest.approx(0.5, abs=0.01)
    assert p.eta_s == pytest.approx(24 * 60, abs=60)
    tracker.check_stall(now + 300)  # a redraw comes every 6 minutes: not stalled
    assert tracker.phase is Phase.LOADING and tracker.failure is None
