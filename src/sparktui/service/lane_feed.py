"""What the console learns of one lane: the lane watcher's events
(watch/lane.py) turned into service events — the lane's row, its log lines,
the fatal alert with the next step — and its classified lines handed to the
thrash detector. It decides nothing and watches nothing itself."""

from __future__ import annotations

from collections.abc import Callable

from sparktui.core.advice import fatal_next_step
from sparktui.core.logsig import Phase
from sparktui.core.phases import Failure
from sparktui.service.events import Alert, AlertRaised, LaneChanged, LogLinesArrived, Sink
from sparktui.service.lanes import LaneView
from sparktui.watch.lane import FatalDecided, LaneEvent, LaneWatcher, LinesArrived
from sparktui.watch.thrash import ThrashDetector


def fatal_alert(lane: str, phase: Phase, failure: Failure) -> Alert:
    evidence = (f"rank {failure.rank} ({phase}): {failure.line}",
                *((f"cause: {failure.cause}",) if failure.cause else ()),
                *failure.context[-3:])
    return Alert(f"fatal:{lane}", "fatal", lane, evidence,
                 fatal_next_step(failure.kind, failure.rank))


class LaneFeed:
    """Subscribed to one lane's watcher for the console's service."""

    def __init__(self, watcher: LaneWatcher, cluster: Callable[[], str], sink: Sink, *,
                 detector: ThrashDetector | None = None, protected: bool = False,
                 uptime: Callable[[], float | None] = lambda: None) -> None:
        self.watcher = watcher
        self.cluster = cluster
        self._sink = sink
        self._detector = detector
        self._protected = protected
        self._uptime = uptime
        self._last_view: LaneView | None = None
        self.gate: tuple[str, str] = ("", "")
        """(state, one-line verdict) of the lane's last quality gate (the service sets it)."""
        self.unsubscribe = watcher.subscribe(self.on_event)

    def on_event(self, event: LaneEvent) -> None:
        if isinstance(event, LinesArrived):
            if self._detector is not None:
                for ev in event.events:
                    if ev is not None:
                        self._detector.on_event(event.node, ev)
            self._sink(LogLinesArrived(event.lane, event.rank, event.lines, event.delivered))
        elif isinstance(event, FatalDecided):
            self._sink(AlertRaised(fatal_alert(event.lane, self.watcher.tracker.phase,
                                               event.failure)))
        self.publish()

    def view(self) -> LaneView:
        w = self.watcher
        t = w.tracker
        lp = t.load_progress() if t.phase is Phase.LOADING else None
        first = w.ranks[0] if w.ranks else None
        return LaneView(
            name=w.lane,
            cluster=self.cluster(),
            engine=first.engine if first else "",
            port=first.port if first else None,
            ranks=w.ranks,
            phase=t.phase.value,
            progress=lp.fraction if lp else None,
            progress_text=lp.describe() if lp else "",
            kv_tokens=t.kv.tokens,
            concurrency=t.kv.concurrency,
            health=w.health,
            decode_tps=w.decode_tps,
            uptime_s=self._uptime(),
            protected=self._protected,
            failure=t.failure.describe() if t.failure else "",
            gate=self.gate[0],
            gate_text=self.gate[1],
        )

    def publish(self) -> None:
        """Report the lane when what the console shows of it changed."""
        view = self.view()
        if view != self._last_view:
            self._last_view = view
            self._sink(LaneChanged(view))
