"""What the console learns of one lane: the lane watcher's events
(watch/lane.py) turned into service events — the lane's row, its log lines,
the fatal alert with the next step — and its classified lines handed to the
thrash detector. It decides nothing and watches nothing itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from sparktui.core.advice import fatal_next_step
from sparktui.core.failure import Failure
from sparktui.core.loadprogress import LoadProgress
from sparktui.core.logsig import Phase
from sparktui.service.events import Alert, AlertRaised, LaneChanged, LogLinesArrived, Sink
from sparktui.service.lanes import STOPPED, STOPPING, UNRESPONSIVE, LaneView
from sparktui.watch.canary import ServingCanary
from sparktui.watch.lane import (
    EndpointChecked,
    FatalDecided,
    LaneEvent,
    LaneWatcher,
    LinesArrived,
)
from sparktui.watch.thrash import ThrashDetector

UNLISTED_BOUND_S = 120.0
"""How long (the service's clock) a lane no poll lists any more waits for its
watcher to say how it ended before it is dropped all the same: a rank's log
stream whose node cannot tell that the container is gone (`docker inspect`
failing) is followed on, and would keep the lane forever. The watcher's own
bounds are 5-10 s a read (watch/follower.py); a removed container's stream
ends within one of them."""


def fatal_alert(lane: str, phase: Phase, failure: Failure) -> Alert:
    evidence = (f"rank {failure.rank} ({phase}): {failure.line}",
                *((f"cause: {failure.cause}",) if failure.cause else ()),
                *failure.context[-3:])
    return Alert(f"fatal:{lane}", "fatal", lane, evidence,
                 fatal_next_step(failure.why, failure.rank))


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
        self._phases_told = 0
        """Boot phases of the tracker's (in the order reached) reported so far."""
        self._decided = False
        """The watcher decided the lane's failure (its fatal alert went)."""
        self._unlisted_at: float | None = None
        """When a full poll first no longer listed the lane's containers."""
        self.gate: tuple[str, str] = ("", "")
        """(state, one-line verdict) of the lane's last quality gate (the service sets it)."""
        self.weights_gib: float | None = None
        """The recipe's weights per rank (the service sets it when it knows the
        recipe): the watcher's memory become resident on the ranks' nodes is
        counted against it, the load's progress when the log prints none
        (InstantTensor on most ranks)."""
        self._canary = canary
        self._canary_task = asyncio.create_task(
            canary.run(self._serving_endpoint), name=f"canary:{watcher.lane}") \
            if canary is not None else None
        self.unsubscribe = watcher.subscribe(self.on_event)

    def detach(self) -> None:
        """Nothing of the lane is reported from now on: the watcher's events
        are no longer heard and the canary's rounds are cancelled (`close`
        waits for them to end). A lane gone reports nothing after its LaneGone."""
        self.unsubscribe()
        if self._canary_task is not None:
            self._canary_task.cancel()

    async def close(self) -> None:
        """Stop listening and end the canary's rounds."""
        self.detach()
        if self._canary_task is not None:
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
        elif isinstance(event, FatalDecided):
            self._decided = True
            self._sink(AlertRaised(fatal_alert(event.lane, self.watcher.tracker.phase,
                                               event.failure)))
        self.publish()

    def listed(self) -> None:
        """A poll lists the lane's containers (again)."""
        self._unlisted_at = None

    def gone(self, now: float) -> bool:
        """A full poll no longer lists the lane's containers: is it gone? Only
        once its watcher said how it ended -- stopped (every rank exited after
        our stop) or failed (its fatal decided) -- and that was published: the
        watcher is the one truth of the lane's phase, and a poll that ran
        ahead of its follower must not end the lane at `stopping` (or a
        dying lane before its FATAL). Or after UNLISTED_BOUND_S without a word."""
        if self._unlisted_at is None:
            self._unlisted_at = now
        return self.watcher.stopped or self._decided \
            or now - self._unlisted_at >= UNLISTED_BOUND_S

    def view(self) -> LaneView:
        w = self.watcher
        t = w.tracker
        lp = self._load_progress()
        first = w.ranks[0] if w.ranks else None
        canary = self._canary.verdict if self._canary is not None else None
        unresponsive = canary is not None and canary.unresponsive and t.phase is Phase.SERVING
        phase = UNRESPONSIVE if unresponsive else t.phase.value
        if w.stopping_since is not None and t.failure is None:
            phase = STOPPED if w.stopped else STOPPING
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
        if (lp := t.load_progress()) is not None or self.weights_gib is None:
            return lp
        return self.watcher.memory.progress(((r.node, r.rank) for r in self.watcher.ranks),
                                            self.weights_gib)

    def publish(self) -> None:
        """Report the lane when what the console shows of it changed: first
        each boot phase the tracker passed since the last report and has left
        already, in the order reached, then the lane as it is. One watcher
        event can follow several phases (a batch of log lines reaching API
        starting while the endpoint check, beside it, makes the lane serving),
        and every subscriber (the story a recording keeps, a stall's page, a
        sentinel's line per phase) must see each one."""
        view = self.view()
        t = self.watcher.tracker
        reached = list(t.phase_times)  # in the order reached; one entry a phase
        for phase in reached[self._phases_told:]:
            if phase is not t.phase:
                self._send(replace(view, phase=phase.value, progress=None,
                                   progress_text="", load=None))
        self._phases_told = len(reached)
        self._send(view)

    def _send(self, view: LaneView) -> None:
        if view != self._last_view:
            self._last_view = view
            self._sink(LaneChanged(view))
