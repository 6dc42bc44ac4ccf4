"""What a console reads of the cluster, from one source at a time: this
process's own poller, lane feeds and detector (`LocalReads`), or an attached
sentinel's stream folded into a `StreamState` (`MirrorReads`). The service
picks the source when it starts and again when the sentinel goes away; the
reading methods never ask which one it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from sparktui.core.clock import Clock
from sparktui.core.state import ClusterSnapshot, HistoryPoint, NodeSnapshot, NodeState
from sparktui.core.thrash import ThrashVerdict
from sparktui.service.lane_feed import LaneFeed
from sparktui.service.lanes import LaneView
from sparktui.service.stream import StreamState
from sparktui.watch.follower import LogLine
from sparktui.watch.lane import LaneWatchers
from sparktui.watch.poller import Poller
from sparktui.watch.thrash import ThrashDetector


class ClusterReads(Protocol):
    def snapshot(self) -> ClusterSnapshot: ...
    def history(self, node: str) -> tuple[HistoryPoint, ...]: ...
    def lanes(self) -> dict[str, LaneView]: ...
    def log_tail(self, lane: str, rank: int) -> tuple[list[LogLine], int]: ...
    def verdict(self, node: str) -> ThrashVerdict: ...


class LocalReads:
    """This process watches: the poller's snapshots and history, the lane
    feeds' views, the shared watchers' log buffers, the detector's verdicts.
    ``poller`` is None before the service started (nothing to show yet)."""

    def __init__(self, poller: Poller | None, feeds: Mapping[str, LaneFeed],
                 watchers: LaneWatchers, detector: ThrashDetector, clock: Clock) -> None:
        self._poller = poller
        self._feeds = feeds
        self._watchers = watchers
        self._detector = detector
        self._clock = clock

    def snapshot(self) -> ClusterSnapshot:
        if self._poller is None:
            return ClusterSnapshot(self._clock.time(), ())
        return self._poller.snapshot()

    def history(self, node: str) -> tuple[HistoryPoint, ...]:
        return self._poller.history(node) if self._poller is not None else ()

    def lanes(self) -> dict[str, LaneView]:
        return {name: feed.view() for name, feed in self._feeds.items()}

    def log_tail(self, lane: str, rank: int) -> tuple[list[LogLine], int]:
        watch = self._watchers.get(lane)
        if watch is None or rank not in watch.buffers:
            return [], 0
        return list(watch.buffers[rank]), watch.delivered.get(rank, 0)

    def verdict(self, node: str) -> ThrashVerdict:
        return self._detector.verdict(node)


class MirrorReads:
    """An attached sentinel watches: its stream, as folded so far. A node it
    has not reported yet reads as unknown, saying so. ``lost_at``: the sentinel
    went then and nothing replaces it (an ``--attached-only`` console): its last
    state is shown, every lane stale since (a node's age shows by itself)."""

    def __init__(self, state: StreamState, nodes: Sequence[str], clock: Clock, *,
                 lost_at: float | None = None) -> None:
        self._state = state
        self._nodes = nodes
        self._clock = clock
        self._lost_at = lost_at

    def snapshot(self) -> ClusterSnapshot:
        now = self._clock.time()
        return ClusterSnapshot(now, tuple(
            self._state.latest(n) or NodeSnapshot(n, NodeState.UNKNOWN, now,
                                                  error="not reported by the sentinel yet")
            for n in self._nodes))

    def history(self, node: str) -> tuple[HistoryPoint, ...]:
        return self._state.history(node)

    def lanes(self) -> dict[str, LaneView]:
        if self._lost_at is None:
            return dict(self._state.lanes)
        since = self._clock.time() - self._lost_at
        return {name: replace(v, stale_s=(v.stale_s or 0.0) + since)
                for name, v in self._state.lanes.items()}

    def log_tail(self, lane: str, rank: int) -> tuple[list[LogLine], int]:
        return self._state.log_tail(lane, rank)

    def verdict(self, node: str) -> ThrashVerdict:
        return self._state.verdict(node)
