"""Ingest's fast path is exact through the phase tracker: fed the same lines,
a tracker whose classify is the plain signature table walk (no prefilter, no
boring shapes, the logger prefixes stripped one regex at a time) returns the
same event for every line and ends every line in the same phase, failure,
KV pool and progress. Corpora: the real lines of test_logsig, the boring
shapes, the benchmark's mix, fuzzed multi-rank sequences, and (in
tests/sim/test_logsig_recorded.py) the simulator's recorded boot logs."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core import phases
from sparktui.core.phases import PhaseTracker

sys.path.insert(0, str(Path(__file__).parent))
from test_logsig_prefilter import BORING_LINES, NEEDLES, PREFIXES, REAL, table_only

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from bench_watch import MIX

Fed = tuple[int, str, float, str | None]
"""rank, line (without docker's stamp when one is given), read time, docker's stamp."""


def trace(lines: Iterable[Fed], *, plain: bool) -> tuple[object, ...]:
    """Everything the tracker says, after every line and at the end."""
    tr = PhaseTracker("lane", stall_after_s=600.0, start=0.0, context_lines=5)
    steps = []
    with mock.patch.object(phases, "classify", table_only) if plain else nullcontext():
        for rank, text, now, ts in lines:
            ev = tr.feed(rank, text, now, ts)
            steps.append((ev, tr.phase, tr.failure, tr.kv, tr.last_progress,
                          tr.last_progress_at, tr.check_stall(now)))
    return (steps, tr.stage_seconds(), tr.phase_times, tr.load_progress(), tr.rank_shards(),
            tr.summary())


def assert_same(lines: list[Fed]) -> None:
    fast, plain = trace(lines, plain=False), trace(lines, plain=True)
    assert fast == plain


def stamp(t: float) -> str:
    whole = int(t)
    return f"2026-11-29T01:{whole // 60 % 60:02d}:{whole % 60:02d}.{int(t % 1 * 1e9):09d}Z"


def test_the_real_lines_as_one_boot_of_four_ranks() -> None:
    lines: list[Fed] = []
    for i, line in enumerate(REAL * 2):
        lines.append((i % 4, line, float(i), stamp(i)))
        lines.append(((i + 1) % 4, BORING_LINES[i % len(BORING_LINES)], float(i), stamp(i)))
    assert_same(lines)


def test_the_benchmark_mix() -> None:
    assert_same([(0, MIX[i % len(MIX)], i / 10, stamp(i / 10)) for i in range(4000)])


def test_the_real_lines_with_their_prefixes_read_without_a_split_stamp() -> None:
    lines: list[Fed] = [(i % 3, prefix + line, float(i), None)
                        for i, (prefix, line) in enumerate(
                            (p, x) for x in REAL + BORING_LINES for p in PREFIXES)]
    assert_same(lines)


_LINE = st.one_of(
    st.sampled_from(REAL),
    st.sampled_from(BORING_LINES),
    st.sampled_from(NEEDLES),
    st.builds(lambda p, x: p + x, st.sampled_from(PREFIXES), st.sampled_from(REAL)),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), _LINE, st.floats(0, 700), st.booleans()),
                max_size=40))
def test_fuzzed_multi_rank_sequences(steps: list[tuple[int, str, float, bool]]) -> None:
    """Ranks interleaved, lines read in any order at any time, some with a
    docker stamp: fatal lines, tracebacks, phases and stalls all agree."""
    now, lines = 0.0, []
    for rank, line, dt, stamped in steps:
        now += dt
        lines.append((rank, line, now, stamp(now) if stamped else None))
    assert_same(lines)
