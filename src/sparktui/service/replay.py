"""A recorded night played back as if it were the cluster: `ReplaySource`
answers what the console reads of `ClusterService` (snapshot, history, lanes,
log tails, alerts, the detector's verdict) from the recording, and reports
the recorded events to the console's sink when the replay clock reaches
them. It changes nothing anywhere: there is no action to take on a past.

The recording is a `Recorded` session: its events' times and routes are
indexed, each event decoded when the replay reaches it. The replay clock runs
at ``speed`` times real time from ``start``; `pause`, `step` (seconds, either
way) and `next_alert` move it. A seek brings the folded state to the new time
and reports the state at that moment (the newest snapshot of each node with
its recent history, the lanes, the active alerts) to a console that has
started a fresh screen for it: a short way is folded on (from where the
replay is, or from a kept copy of the state before it); a long one is folded
from only the events the state keeps (`stream.folded_tail`), so opening a
night at ``--from`` decodes a history per node, not the night.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import gc
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sparktui.core.config import Config
from sparktui.core.errors import Problem
from sparktui.core.nodehealth import Finding, node_findings
from sparktui.core.state import ClusterSnapshot, HistoryPoint
from sparktui.core.thrash import ThrashVerdict
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    LaneChanged,
    ServiceEvent,
    Sink,
)
from sparktui.service.lanes import LaneView
from sparktui.service.recorded import Recorded
from sparktui.service.stream import StreamState, folded_tail
from sparktui.watch.follower import LogLine
from sparktui.watch.poller import DEFAULT_HISTORY

TICK_S = 0.1
"""Real seconds between two steps of the replay clock."""
RESYNC_POINTS = 120
"""Snapshots per node reported again after a seek (the memory pane's history)."""
MARK_EVERY_S = 600.0
"""Recorded seconds between two kept copies of the folded state: a seek back
folds on from the last copy before it, not from the recording's start."""
MARKS_KEPT = 64
"""At most this many copies (a longer night spaces them further apart)."""


class ReplaySource:
    """Looks like `ClusterService` to the console; plays a recording."""

    def __init__(self, config: Config, events: Recorded | Sequence[tuple[float, ServiceEvent]],
                 *, speed: float = 1.0, start: float | None = None) -> None:
        self.config = config
        self.events = events if isinstance(events, Recorded) else Recorded.of(events)
        self._times = self.events.times
        self.speed = speed
        self.first = self._times[0] if self._times else time.time()
        self.last = self._times[-1] if self._times else self.first
        self.now = self.first if start is None else min(max(start, self.first), self.last)
        self.paused = False
        self.recipe_problems: list[Problem] = []
        self.recipes: dict[str, Any] = {}
        self.attached = ""
        """A replay listens to no sentinel (the console's header says so when one does)."""
        self._state = StreamState()
        self._next = 0
        self._marks: list[tuple[int, StreamState]] = []
        """(events folded, a copy of the state then), in recording order."""
        self._mark_every = max(MARK_EVERY_S, (self.last - self.first) / MARKS_KEPT)
        self._mark_at = self.first + self._mark_every
        self._tail_over = DEFAULT_HISTORY * max(len(config.nodes), 1)
        """Events past which a seek folds from the tail (it decodes about a
        history per node) rather than on."""
        self._sink: Sink = _drop
        self._task: asyncio.Task[None] | None = None

    # -- the service's face --------------------------------------------------

    async def start(self, sink: Sink) -> None:
        self._sink = sink
        self._seek_to(self.now)
        self._task = asyncio.create_task(self._run(), name="replay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def snapshot(self) -> ClusterSnapshot:
        found = (self._state.latest(n) for n in self.config.nodes)
        snaps = tuple(s for s in found if s is not None)
        return ClusterSnapshot(self.now, snaps)

    def history(self, node: str) -> tuple[HistoryPoint, ...]:
        return self._state.history(node)

    def lanes(self) -> dict[str, LaneView]:
        return dict(self._state.lanes)

    def log_tail(self, lane: str, rank: int) -> tuple[list[LogLine], int]:
        return self._state.log_tail(lane, rank)

    def alerts(self) -> list[Alert]:
        return list(self._state.alerts.values())

    def verdict(self, node: str) -> ThrashVerdict:
        """The last recorded verdict."""
        return self._state.verdict(node)

    def unfinished(self) -> list[object]:
        return []  # a replay offers nothing to resume

    def findings(self, node: str) -> list[Finding]:
        """What was wrong with ``node`` at the replay's moment (core/nodehealth)."""
        return node_findings(self.config, self.snapshot().get(node), node)

    # -- the replay clock ------------------------------------------------------

    @property
    def at_end(self) -> bool:
        return self._next >= len(self.events)

    def pause(self) -> None:
        self.paused = not self.paused


    def next_alert_time(self) -> float | None:
        """When the next alert after now was raised (None: no more alerts): a
        new key, or a key raised again after it cleared; an update of an
        active alert (new evidence, the phone told) is not a new alert."""
        active = set(self._state.alerts)
        kinds = self.events.kinds
        for i in range(self._next, len(self.events)):
            if kinds[i] not in ("AlertRaised", "AlertCleared"):
                continue
            t, ev = self.events[i]
            if isinstance(ev, AlertCleared):
                active.discard(ev.key)
            elif isinstance(ev, AlertRaised) and ev.alert.key not in active:
                return t
        return None

    def seek(self, t: float) -> None:
        self._seek_to(min(max(t, self.first), self.last))

    def _seek_to(self, t: float) -> None:
        """Fold the recording up to ``t``: on from where it is or from the last
        kept copy before ``t``, whichever is nearer; from the tail when both
        are far."""
        self.now = t
        end = bisect.bisect_right(self._times, t)
        at = bisect.bisect_right(self._marks, end, key=lambda m: m[0])
        folded, state = self._marks[at - 1] if at else (0, StreamState())
        ahead = end - self._next if end >= self._next else len(self.events)
        with _bulk():
            if min(ahead, end - folded) > self._tail_over:
                ev = self.events
                self._state = folded_tail(end, self._times, ev.kinds, ev.keys, ev.event)
                self._next = end
                self._keep_mark()
            elif end - folded < ahead:
                self._state, self._next = state.copy(), folded
            while self._next < end:
                self._fold_next()
        self._resync()

    def _keep_mark(self) -> None:
        """A copy of the state now among the kept ones (at most MARKS_KEPT:
        past it, the one nearest its successor goes)."""
        bisect.insort(self._marks, (self._next, self._state.copy()), key=lambda m: m[0])
        if len(self._marks) > MARKS_KEPT:
            gaps = [b[0] - a[0] for a, b in zip(self._marks, self._marks[1:], strict=False)]
            del self._marks[gaps.index(min(gaps))]
        if self._next:
            self._mark_at = self._times[self._next - 1] + self._mark_every

    def _fold_next(self) -> ServiceEvent | None:
        """Fold the next event (None: it did not decode), keeping a copy of the
        state every ``_mark_every``."""
        at, ev = self.events[self._next]
        self._next += 1
        if ev is not None:
            self._state.fold(at, ev)
        if at >= self._mark_at:  # past every kept copy: this one is the next
            self._keep_mark()
        return ev

    def _resync(self) -> None:
        """Report the state at ``now`` to a fresh console: the alerts as the
        night told them, each raise, update and clear at its recorded time
        (an alert raised before the kept timeline first, as it stands)."""
        st = self._state
        for node in self.config.nodes:
            for _, ev in st.recent(node, RESYNC_POINTS):
                self._sink(ev)
        for lane in st.lanes.values():
            self._sink(LaneChanged(lane))
        told_from = st.timeline[0][0] if st.timeline else self.last
        for key, alert in st.alerts.items():
            at = st.raised_at.get(key)
            if at is None or at < told_from:
                self._sink(AlertRaised(alert, at=at))
        for at, told in st.timeline:
            self._sink(dataclasses.replace(told, at=at))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if self.paused or self.at_end:
                continue
            self.now = min(self.now + TICK_S * self.speed, self.last)
            while self._next < len(self.events) and self._times[self._next] <= self.now:
                at = self._times[self._next]
                ev = self._fold_next()
                if ev is None:
                    continue
                if isinstance(ev, AlertRaised | AlertCleared):
                    ev = dataclasses.replace(ev, at=at)  # the recorded time, not the tick's
                self._sink(ev)


@contextmanager
def _bulk() -> Iterator[None]:
    """No cyclic collection while a seek decodes thousands of acyclic events
    (each pass would walk the history already decoded: half a seek's time).
    Not `gc.freeze` after it: a screen the seek replaced, still referenced
    then, would never be collected."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _drop(event: ServiceEvent) -> None:
    """Before `start`: nothing listens yet."""
