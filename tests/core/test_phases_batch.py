"""`PhaseTracker.feed_lines` (a slice of a rank's lines read together, what
`LaneWatcher._ingest` feeds) is `feed` of each line in turn: the same events,
and after every slice the same phase, failure, KV pool, progress, per-rank
recent lines, shard progress, read times and stage seconds as a tracker fed
line by line through the plain signature table walk (no prefilter, no boring
shapes, no batching)."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core import phases
from sparktui.core.phases import PhaseTracker
from sparktui.watch.follower import LogLine

sys.path.insert(0, str(Path(__file__).parent))
from test_logsig_ingest import _LINE, stamp
from test_logsig_prefilter import BORING_LINES, PREFIXES, REAL, table_only

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from bench_watch import MIX

Slice = tuple[int, list[LogLine], float]
"""rank, its lines read together, read time."""


def state(tr: PhaseTracker) -> tuple[object, ...]:
    ranks = {r: (tuple(s.recent), s.lines, s.read_at, s.read_ts, s.offset, s.traceback_line,
                 s.shards) for r, s in tr._ranks.items()}
    return (tr.phase, tr.failure, tr.kv, tr.last_progress, tr.last_progress_at, ranks,
            tr.stage_seconds(), dict(tr.phase_times), tr.load_progress(), tr.rank_shards(),
            tr.summary())


def run(slices: list[Slice], *, batched: bool) -> list[object]:
    tr = PhaseTracker("lane", stall_after_s=600.0, start=0.0, context_lines=5)
    out: list[object] = []
    with nullcontext() if batched else mock.patch.object(phases, "classify", table_only):
        for rank, lines, now in slices:
            if batched:
                events = tr.feed_lines(rank, lines, now)
            else:
                events = [tr.feed(rank, line.text, now, line.ts) for line in lines]
            out.append((events, state(tr), tr.check_stall(now)))
    return out


def assert_same(slices: list[Slice]) -> None:
    assert run(slices, batched=True) == run(slices, batched=False)


def line(rank: int, text: str, ts: str | None) -> LogLine:
    return LogLine(rank, ts, text)


def test_the_benchmark_mix_in_slices() -> None:
    slices = []
    for k in range(60):
        now = k / 3
        slices.append((k % 3, [line(k % 3, MIX[(k + i) % len(MIX)], stamp(now + i / 100))
                               for i in range(64)], now))
    assert_same(slices)


def test_a_boot_and_a_failure_in_slices_of_every_size() -> None:
    corpus = REAL + BORING_LINES
    for size in (1, 2, 7, 64):
        slices, i = [], 0
        while i < len(corpus) * 2:
            rank = i // size % 4
            slices.append((rank, [line(rank, corpus[j % len(corpus)], stamp(j))
                                  for j in range(i, i + size)], float(i // 3)))
            i += size
        assert_same(slices)


def test_lines_without_a_split_stamp_are_split_as_feed_splits_them() -> None:
    texts = [p + x for x in REAL + BORING_LINES for p in PREFIXES]
    slices = [(k % 2, [line(k % 2, stamp(j) + " " + t if j % 3 else t, None)
                       for j, t in enumerate(texts[k:k + 9], k)], float(k))
              for k in range(0, len(texts), 9)]
    assert_same(slices)


_TEXT = st.one_of(_LINE, st.sampled_from(MIX))
"""The ingest fuzz's lines, and the bench's."""


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(st.tuples(_TEXT, st.integers(0, 2)),
                                                      max_size=8),
                          st.floats(0, 400), st.booleans()), max_size=16))
def test_fuzzed_slices_of_interleaved_ranks(
        steps: list[tuple[int, list[tuple[str, int]], float, bool]]) -> None:
    """Slices of any length (empty too) from ranks in any order, read at any
    time or twice at the same time, lines stamped, unstamped, or carrying
    their stamp in the text: fatal lines, tracebacks, phases, stalls,
    after-lines and read times all agree."""
    now, slices = 0.0, []
    for rank, texts, dt, same_time in steps:
        now += 0.0 if same_time else dt
        lines = []
        for k, (text, how) in enumerate(texts):
            t = stamp(now + k / 1000)
            lines.append(line(rank, text, t) if how == 0 else
                         line(rank, text, None) if how == 1 else line(rank, f"{t} {text}", None))
        slices.append((rank, lines, now))
    assert_same(slices)
