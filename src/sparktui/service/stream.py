"""What a stream of service events has said so far, folded and bounded: the
state a console reads when the events are not its own service's. A replay
(service/replay.py) folds a recording up to its clock; an attached console
(service/attach.py) folds the sentinel's stream, and the sentinel keeps one
to tell a console that attaches what the night held before it came."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence

from sparktui.core.state import HistoryPoint, NodeSnapshot
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    LaneChanged,
    LaneGone,
    LogLinesArrived,
    NodeSampled,
    ServiceEvent,
)
from sparktui.service.lanes import LaneView
from sparktui.watch.follower import LogLine
from sparktui.watch.lane import LOG_BUFFER_LINES
from sparktui.watch.poller import DEFAULT_HISTORY

ALERT_TIMELINE = 500


class StreamState:
    """Per node its recent samples (the memory history) and last verdict; the
    lanes; each followed rank's log buffer; the active alerts and the order
    alerts came and went in."""

    def __init__(self) -> None:
        self.samples: dict[str, deque[tuple[float, NodeSampled]]] = {}
        self.verdicts: dict[str, ThrashVerdict] = {}
        self.lanes: dict[str, LaneView] = {}
        self.logs: dict[tuple[str, int], deque[LogLine]] = {}
        self.delivered: dict[tuple[str, int], int] = {}
        self.alerts: dict[str, Alert] = {}
        self.raised_at: dict[str, float] = {}
        """When each active alert was first raised (its updates keep it)."""
        self.timeline: deque[tuple[float, AlertRaised | AlertCleared]] = deque(
            maxlen=ALERT_TIMELINE)

    def copy(self) -> StreamState:
        """An independent state equal to this one (the events are shared:
        they are immutable; only the containers are copied)."""
        out = StreamState()
        out.samples = {k: deque(v, maxlen=v.maxlen) for k, v in self.samples.items()}
        out.verdicts = dict(self.verdicts)
        out.lanes = dict(self.lanes)
        out.logs = {k: deque(v, maxlen=v.maxlen) for k, v in self.logs.items()}
        out.delivered = dict(self.delivered)
        out.alerts = dict(self.alerts)
        out.raised_at = dict(self.raised_at)
        out.timeline = deque(self.timeline, maxlen=self.timeline.maxlen)
        return out

    def fold(self, t: float, ev: ServiceEvent) -> None:
        """One event, reported at ``t`` (epoch s)."""
        if isinstance(ev, NodeSampled):
            node = ev.snapshot.node
            self.samples.setdefault(node, deque(maxlen=DEFAULT_HISTORY)).append((t, ev))
            if ev.verdict is not None:
                self.verdicts[node] = ev.verdict
        elif isinstance(ev, LaneChanged):
            self.lanes[ev.lane.name] = ev.lane
        elif isinstance(ev, LaneGone):
            self.lanes.pop(ev.name, None)
        elif isinstance(ev, LogLinesArrived):
            key = (ev.lane, ev.rank)
            self.logs.setdefault(key, deque(maxlen=LOG_BUFFER_LINES)).extend(ev.lines)
            self.delivered[key] = ev.end
        elif isinstance(ev, AlertRaised):
            self.raised_at.setdefault(ev.alert.key, t)
            self.alerts[ev.alert.key] = ev.alert
            self.timeline.append((t, ev))
        elif isinstance(ev, AlertCleared):
            self.alerts.pop(ev.key, None)
            self.raised_at.pop(ev.key, None)
            self.timeline.append((t, ev))

    def latest(self, node: str) -> NodeSnapshot | None:
        samples = self.samples.get(node)
        return samples[-1][1].snapshot if samples else None

    def recent(self, node: str, n: int) -> list[tuple[float, NodeSampled]]:
        return list(self.samples.get(node, ()))[-n:]

    def history(self, node: str) -> tuple[HistoryPoint, ...]:
        return tuple(ev.last_point for _, ev in self.samples.get(node, ())
                     if ev.last_point is not None)

    def verdict(self, node: str) -> ThrashVerdict:
        return self.verdicts.get(node) or ThrashVerdict(node, ThrashLevel.OK, (), "", 0)

    def log_tail(self, lane: str, rank: int) -> tuple[list[LogLine], int]:
        key = (lane, rank)
        return list(self.logs.get(key, ())), self.delivered.get(key, 0)

    def story(self, samples_per_node: int) -> Iterator[tuple[float, ServiceEvent]]:
        """The state as events, oldest first, for a console that starts now:
        the alerts in the order they came and each node's recent samples, then
        each lane's view and each followed rank's log buffer."""
        timed: list[tuple[float, ServiceEvent]] = [*self.timeline]
        for node in self.samples:
            timed.extend(self.recent(node, samples_per_node))
        timed.sort(key=lambda p: p[0])
        yield from timed
        now = timed[-1][0] if timed else 0.0
        for view in self.lanes.values():
            yield now, LaneChanged(view)
        for (lane, rank), lines in self.logs.items():
            yield now, LogLinesArrived(lane, rank, tuple(lines), self.delivered[(lane, rank)])


def folded_tail(end: int, times: Sequence[float], kinds: Sequence[str], keys: Sequence[str],
                event: Callable[[int], ServiceEvent | None]) -> StreamState:
    """The state one fold of events ``[0, end)`` leaves, from only the events
    that state keeps, found from the newest back by their class names
    (``kinds``) and routes (``keys``: node, lane, lane and rank): each node's
    last DEFAULT_HISTORY samples (and the last verdict, when they hold none),
    each lane's last view (in the order the lanes came), each rank's last
    LOG_BUFFER_LINES log lines, every alert. ``event(i)`` decodes one (None:
    it does not decode, as for the fold). What opening a long night at a
    late moment costs: about a history per node, not the night."""
    picked: list[int] = []
    decoded: dict[int, ServiceEvent] = {}
    samples: dict[str, int] = {}
    verdict_known: set[str] = set()
    lines: dict[str, int] = {}
    lane_view: dict[str, LaneView | None] = {}
    lane_since: dict[str, int] = {}  # when the lane's present view came (the fold's order)
    lane_closed: set[str] = set()

    def take(i: int) -> ServiceEvent | None:
        ev = event(i)
        if ev is not None:
            decoded[i] = ev
        return ev

    for i in range(end - 1, -1, -1):
        kind, key = kinds[i], keys[i]
        if kind == "NodeSampled":
            n = samples.get(key, 0)
            if n >= DEFAULT_HISTORY and key in verdict_known:
                continue
            ev = take(i)
            if not isinstance(ev, NodeSampled):
                continue
            if n < DEFAULT_HISTORY or ev.verdict is not None:  # else: pushed out, no verdict
                picked.append(i)
                samples[key] = n + 1
            if ev.verdict is not None:
                verdict_known.add(key)
        elif kind == "LogLinesArrived":
            if lines.get(key, 0) < LOG_BUFFER_LINES and isinstance(ev := take(i),
                                                                   LogLinesArrived):
                picked.append(i)
                lines[key] = lines.get(key, 0) + len(ev.lines)
        elif kind in ("AlertRaised", "AlertCleared"):
            if take(i) is not None:
                picked.append(i)
        elif kind in ("LaneChanged", "LaneGone") and key not in lane_closed:
            if key not in lane_view:
                ev = take(i)
                if isinstance(ev, LaneChanged):
                    lane_view[key], lane_since[key] = ev.lane, i
                elif isinstance(ev, LaneGone):
                    lane_view[key] = None
                    lane_closed.add(key)
                continue
            if kind == "LaneGone" and isinstance(take(i), LaneGone):
                lane_closed.add(key)
            elif kind == "LaneChanged":
                lane_since[key] = i
    out = StreamState()
    for i in sorted(picked):
        out.fold(times[i], decoded[i])
    for name in sorted(lane_since, key=lane_since.__getitem__):
        if (view := lane_view[name]) is not None:
            out.lanes[name] = view
    return out
