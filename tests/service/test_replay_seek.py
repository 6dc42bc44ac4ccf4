"""A replay's seeks fold on from where they are (forward) or from the last
kept copy of the state before the target (back), never from the start; any
sequence of seeks leaves exactly the state, and reports exactly the events,
of one fold of the recording up to the last target."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.config_load import load_config
from sparktui.service import replay
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    LogLinesArrived,
    ServiceEvent,
)
from sparktui.service.replay import ReplaySource
from sparktui.watch.follower import LogLine

from ..conftest import SHIPPED_CONFIG

CONFIG = load_config(SHIPPED_CONFIG)
T0 = 1_764_455_700.0


def recording(n: int) -> list[tuple[float, ServiceEvent]]:
    """``n`` events, one every 7 s: log lines of two ranks, alerts raised and cleared."""
    out: list[tuple[float, ServiceEvent]] = []
    delivered = [0, 0]
    for i in range(n):
        t = T0 + 7.0 * i
        if i % 5 == 3:
            out.append((t, AlertRaised(Alert(f"thrash:dgx{i % 3 + 5}", "thrash", "dgx5",
                                             (f"e{i}",), "recover"))))
        elif i % 5 == 4:
            out.append((t, AlertCleared(f"thrash:dgx{(i // 2) % 3 + 5}")))
        else:
            rank = i % 2
            delivered[rank] += 2
            lines = tuple(LogLine(rank, None, f"line {i}.{k}") for k in range(2))
            out.append((t, LogLinesArrived("lane", rank, lines, delivered[rank])))
    return out


def state_of(src: ReplaySource) -> object:
    return (src.now, src.alerts(), [src.log_tail("lane", r) for r in (0, 1)],
            list(src._state.timeline), src._next)


EVENTS = recording(600)  # 70 recorded minutes: copies every 10 (MARK_EVERY_S)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-60, 7.0 * 620), min_size=1, max_size=8))
def test_any_seeks_end_in_the_state_of_one_fold(offsets: list[float]) -> None:
    seen: list[ServiceEvent] = []
    src = ReplaySource(CONFIG, EVENTS)
    src._sink = seen.append
    for off in offsets:
        seen.clear()
        src.seek(T0 + off)
    fresh_seen: list[ServiceEvent] = []
    fresh = ReplaySource(CONFIG, EVENTS, start=src.now)
    fresh._sink = fresh_seen.append
    fresh.seek(src.now)
    assert state_of(src) == state_of(fresh)
    assert seen == fresh_seen


def test_a_seek_back_folds_from_a_kept_copy_not_from_the_start(monkeypatch) -> None:
    src = ReplaySource(CONFIG, EVENTS)
    src.seek(T0 + 7.0 * 590)
    assert len(src._marks) == 6  # one per 10 recorded minutes (the last one at 60 min)
    folded: list[float] = []
    fold = replay.StreamState.fold

    def counted(self, t, ev) -> None:  # type: ignore[no-untyped-def]
        folded.append(t)
        fold(self, t, ev)

    monkeypatch.setattr(replay.StreamState, "fold", counted)
    src.seek(T0 + 7.0 * 560)  # back ~3.5 min: from the 60-min copy (event 515)
    assert 0 < len(folded) < 60
    folded.clear()
    src.seek(T0 + 7.0 * 580)  # forward: only what lies between
    assert len(folded) == 20


def test_a_seek_reports_each_alert_at_its_recorded_time_and_next_alert_skips_updates(
        ) -> None:
    fatal = Alert("fatal:lane", "fatal", "lane", ("boom",), "look")
    night: list[tuple[float, ServiceEvent]] = [
        (T0, AlertRaised(fatal)),
        (T0 + 20, AlertRaised(Alert("thrash:dgx5", "thrash", "dgx5", ("psi",), "r"))),
        (T0 + 30, AlertRaised(fatal)),  # the same FATAL, updated (the phone told)
        (T0 + 40, AlertRaised(Alert("fatal:lane", "fatal", "lane", ("boom", "again"), "x"))),
        (T0 + 50, AlertCleared("thrash:dgx5")),
        (T0 + 60, AlertCleared("fatal:lane")),
        (T0 + 70, AlertRaised(fatal)),  # raised again after it cleared: a new alert
    ]
    seen: list[ServiceEvent] = []
    src = ReplaySource(CONFIG, night, start=T0 + 45)
    src._sink = seen.append
    src.seek(T0 + 45)
    told = [(type(e).__name__, getattr(e, "key", None) or e.alert.key, e.at)  # type: ignore[union-attr]
            for e in seen if isinstance(e, AlertRaised | AlertCleared)]
    assert told == [("AlertRaised", "fatal:lane", T0), ("AlertRaised", "thrash:dgx5", T0 + 20),
                    ("AlertRaised", "fatal:lane", T0 + 30), ("AlertRaised", "fatal:lane", T0 + 40)]
    seen.clear()
    src.seek(T0 + 65)  # what cleared is told too, at its recorded time
    told = [(type(e).__name__, e.at) for e in seen if isinstance(e, AlertRaised | AlertCleared)]
    assert told[-2:] == [("AlertCleared", T0 + 50), ("AlertCleared", T0 + 60)]
    src.seek(T0)
    assert src.next_alert_time() == T0 + 20
    src.seek(T0 + 20)
    assert src.next_alert_time() == T0 + 70  # not T0 + 30 nor T0 + 40


async def test_played_alerts_carry_their_recorded_time(monkeypatch) -> None:
    import asyncio

    night: list[tuple[float, ServiceEvent]] = [
        (T0, LogLinesArrived("lane", 0, (), 0)),
        (T0 + 3.3, AlertRaised(Alert("k", "thrash", "dgx5", (), "r"))),
        (T0 + 7.1, AlertCleared("k")),
    ]
    monkeypatch.setattr(replay, "TICK_S", 0.01)
    src = ReplaySource(CONFIG, night, speed=500.0)
    seen: list[ServiceEvent] = []
    await src.start(seen.append)
    for _ in range(500):
        if src.at_end:
            break
        await asyncio.sleep(0.01)
    await src.stop()
    timed = [(type(e).__name__, e.at) for e in seen if isinstance(e, AlertRaised | AlertCleared)]
    assert timed == [("AlertRaised", T0 + 3.3), ("AlertCleared", T0 + 7.1)]


def full_state(s: replay.StreamState) -> object:
    return ({k: list(v) for k, v in s.samples.items()}, s.verdicts, list(s.lanes.items()),
            {k: list(v) for k, v in s.logs.items()}, s.delivered, list(s.alerts.items()),
            s.raised_at, list(s.timeline))


def _night(draw_ops: list[tuple[int, int, int]]) -> list[tuple[float, ServiceEvent | None]]:
    """A night of node samples (some without a verdict), lane views and
    lanes gone, log batches of any size, alerts; None: a line that did not
    decode."""
    from sparktui.core.thrash import ThrashLevel, ThrashVerdict
    from sparktui.service.events import LaneChanged, LaneGone
    from sparktui.service.lanes import LaneView

    from .test_recording import sampled

    out: list[tuple[float, ServiceEvent | None]] = []
    for i, (op, a, b) in enumerate(draw_ops):
        t = T0 + 3.0 * i
        ev: ServiceEvent | None
        if op == 0:
            s = sampled(t, node=f"dgx{a % 3 + 5}")
            ev = s if b % 4 else replay.dataclasses.replace(s, verdict=None)
            if b % 7 == 1:
                ev = replay.dataclasses.replace(s, verdict=ThrashVerdict(
                    s.snapshot.node, ThrashLevel.SUSPECTED, (f"v{i}",), "", 0))
        elif op == 1:
            ev = LaneChanged(LaneView(f"lane{a % 3}", "c", "vllm", 8000, (), phase=f"p{i}"))
        elif op == 2:
            ev = LaneGone(f"lane{a % 3}")
        elif op == 3:
            ev = LogLinesArrived(f"lane{a % 2}", b % 2, tuple(
                LogLine(b % 2, None, f"l{i}.{k}") for k in range(a % 5)), i)
        elif op == 4:
            ev = AlertRaised(Alert(f"k{a % 3}", "thrash", "dgx5", (f"e{i}",), "r"))
        elif op == 5:
            ev = AlertCleared(f"k{a % 3}")
        else:
            ev = None
        out.append((t, ev))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 20), st.integers(0, 20)),
                min_size=0, max_size=120), st.integers(0, 130))
def test_the_tail_fold_is_the_state_of_one_fold(ops, end) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from sparktui.service import stream
    from sparktui.service.recorded import route

    night = _night(ops)
    end = min(end, len(night))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream, "DEFAULT_HISTORY", 4)
        mp.setattr(stream, "LOG_BUFFER_LINES", 6)
        one = stream.StreamState()
        for t, ev in night[:end]:
            if ev is not None:
                one.fold(t, ev)
        asked: list[int] = []

        def event(i: int) -> ServiceEvent | None:
            asked.append(i)
            return night[i][1]

        kinds = [type(e).__name__ if e is not None else "NodeSampled" for _, e in night]
        keys = [route(e) if e is not None else "dgx5" for _, e in night]
        tail = stream.folded_tail(end, [t for t, _ in night], kinds, keys, event)
    assert full_state(tail) == full_state(one)


def test_a_long_seek_folds_from_the_tail_into_the_state_of_one_fold() -> None:
    from .test_recording import sampled

    night: list[tuple[float, ServiceEvent]] = [
        (T0 + i, sampled(T0 + i, node=f"dgx{i % 4 + 5}")) for i in range(3000)]
    night += [(T0 + 3000 + t, ev) for t, ev in recording(200)]
    src = ReplaySource(CONFIG, night)
    src._tail_over = 100
    src.seek(T0 + 2500)
    assert src._next == 2501 and len(src._marks) == 1  # folded from the tail, kept
    src.seek(T0 + 3000 + 7.0 * 150)
    fresh = ReplaySource(CONFIG, night)
    fresh.seek(src.now)
    assert full_state(src._state) == full_state(fresh._state)
