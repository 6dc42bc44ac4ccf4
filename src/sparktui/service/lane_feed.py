"""What the console learns of one lane: the lane watcher's events
(watch/lane.py) turned into service events — the lane's row, its log lines,
the fatal alert with the next step — and its classified lines handed to the
thrash detector. It decides nothing and watches nothing itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sparktui.core.advice import fatal_next_step
from sparktui.core.logsig import Phase
from sparktui.core.memload import MemoryLoad
from sparktui.core.phases import Failure, LoadProgress
from sparktui.service.events import Alert, AlertRaised, LaneChanged, LogLinesArrived, Sink
from sparktui.service.lanes import LaneView
from sparktui.watch.canary import ServingCanary
from sparktui.watch.lane import (
    EndpointChecked,
    FatalDecided,
    LaneEvent,
    LaneWatcher,
    LinesArrived,
    MemoryRead,
)
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
                 uptime: Callable[[], float | None] = lambda: None,
                 canary: ServingCanary | None = None) -> None:
        """``canary``: the serving canary (watch/canary.py), fed the watcher's
        endpoint checks; its rounds run in a task this feed owns (:meth:`close`)."""
        self.watcher = watcher
        self.cluster = cluster
        self._sink = sink
        self._detector = detector
        self._protected = protected
        self._uptime = uptime
        self._last_view: LaneView | None = None
        self.gate: tuple[str, str] = ("", "")
        """(state, one-line verdict) of the lane's last quality gate (the service sets it)."""
        self.memory_load: MemoryLoad | None = None
        """The weights becoming resident on the ranks' nodes, against the recipe's
        weights per rank (the service sets it when it knows the recipe): the
        load's progress when the log prints none (InstantTensor on most ranks)."""
        self._canary = canary
        self._canary_task = asyncio.create_task(
            canary.run(self._serving_endpoint), name=f"canary:{watcher.lane}") \
            if canary is not None else None
        self.unsubscribe = watcher.subscribe(self.on_event)

    async def close(self) -> None:
        """Stop listening and end the canary's rounds."""
        self.unsubscribe()
        if self._canary_task is not None:
            self._canary_task.cancel()
            await asyncio.gather(self._canary_task, return_exceptions=True)

    def _serving_endpoint(self) -> tuple[str, int] | None:
        """Rank 0's (node, port) while the lane serves: the canary's target."""
        first = self.watcher.ranks[0] if self.watcher.ranks else None
        if self.watcher.tracker.phase is not Phase.SERVING or first is None or not first.port \
                or self.watcher.stopping_since is not None:
            return None
        return first.node, first.port

    def on_event(self, event: LaneEvent) -> None:
        if isinstance(event, LinesArrived):
            if self._detector is not None:
                for ev in event.events:
                    if ev is not None:
                        self._detector.on_event(event.node, ev)
            self._sink(LogLinesArrived(event.lane, event.rank, event.lines, event.delivered))
        elif isinstance(event, EndpointChecked) and self._canary is not None:
            self._canary.observe(event.health, event.metrics,
                                 [r.node for r in self.watcher.ranks], self._serving_endpoint())
        elif isinstance(event, MemoryRead) and self.memory_load is not None:
            self.memory_load.observe(event.node, event.available_kib,
                                     self.watcher.clock.monotonic())
        elif isinstance(event, FatalDecided):
            self._sink(AlertRaised(fatal_alert(event.lane, self.watcher.tracker.phase,
                                               event.failure)))
        self.publish()

    def view(self) -> LaneView:
        w = self.watcher
        t = w.tracker
        lp = self._load_progress()
        first = w.ranks[0] if w.ranks else None
        canary = self._canary.verdict if self._canary is not None else None
        unresponsive = canary is not None and canary.unresponsive and t.phase is Phase.SERVING
        phase = "unresponsive" if unresponsive else t.phase.value
        if w.stopping_since is not None and t.failure is None:
            phase = "stopped" if w.stopped else "stopping"
        return LaneView(
            name=w.lane,
            cluster=self.cluster(),
            engine=first.engine if first else "",
            port=first.port if first else None,
            ranks=w.ranks,
            phase=phase,
            progress=lp.fraction if lp else None,
            progress_text=lp.describe() if lp else "",
            load=lp,
            kv_tokens=t.kv.tokens,
            concurrency=t.kv.concurrency,
            health=w.health,
            decode_tps=w.decode_tps,
            uptime_s=self._uptime(),
            protected=self._protected,
            failure=t.failure.describe() if t.failure else "",
            failure_brief=t.failure.brief() if t.failure else "",
            canary=canary.evidence if canary is not None else (),
            stale_s=self._canary.stale_s(w.endpoint_every_s) if self._canary else None,
            canary_s=self._canary.latency_s if self._canary else None,
            gate=self.gate[0],
            gate_text=self.gate[1],
        )

    def _load_progress(self) -> LoadProgress | None:
        """The log's shards or byte bar (rank 0's), else the memory become
        resident: while loading only."""
        t = self.watcher.tracker
        if t.phase is not Phase.LOADING:
            return None
        if (lp := t.load_progress()) is not None or self.memory_load is None:
            return lp
        return self.memory_load.progress({r.node: r.rank for r in self.watcher.ranks})

    def publish(self) -> None:
        """Report the lane when what the console shows of it changed."""
        view = self.view()
        if view != self._last_view:
            self._last_view = view
            self._sink(LaneChanged(view))
