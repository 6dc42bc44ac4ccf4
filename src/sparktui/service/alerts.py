"""The alerts one `ClusterService` reports: the one place they are raised,
cleared and kept. Every alert event the service reports passes `keep`,
whoever made it (a lane's feed raising its FATAL, the night desk marking one
phoned, a sentinel's stream), so what is kept is what every subscriber was
told; and a lane that is gone has its alerts cleared here, with why, before
its LaneGone (issue 28 item 7: a FATAL outlived its lane in the console and
in the sentinel's `sparktui_alerts_active`)."""

from __future__ import annotations

from dataclasses import replace

from sparktui.core.advice import UNRESPONSIVE_NEXT
from sparktui.core.canary import CanaryVerdict
from sparktui.core.qualify import GateState
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.ops.workflows.qualify import PREDICTED_OOM_STEP, LaneNews
from sparktui.service.events import (
    LANE_GONE,
    Alert,
    AlertCleared,
    AlertRaised,
    ServiceEvent,
    Sink,
)

ALERT_LEVELS: tuple[str, ...] = (
    "fatal", ThrashLevel.THRASH.label, "unresponsive", PREDICTED_OOM_STEP,
    GateState.GARBLED.value, ThrashLevel.SUSPECTED.label, GateState.SLOW.value,
    GateState.FAILED.value, ThrashLevel.PRESSURE.label, "sentinel lost")
"""Every level an alert is raised with, most severe first (a predicted OOM
before a suspicion: it names the minutes left): a lane's FATAL
(service/lane_feed.fatal_alert), a node's memory verdict (`Alerts.thrash`), a
canary's (`Alerts.canary`), a gate's or a predicted OOM (`Alerts.news`), the
sentinel lost (service/attach.py). The console ranks alerts by it
(tui/alertbook.py); the sentinel counts each (service/export.py)."""


class Alerts:
    def __init__(self, emit: Sink) -> None:
        """``emit``: the service's way to report an event (which comes back to `keep`)."""
        self._emit = emit
        self.active: dict[str, Alert] = {}
        """Raised and not cleared, by key, as last reported."""

    def keep(self, event: ServiceEvent) -> None:
        if isinstance(event, AlertRaised):
            self.active[event.alert.key] = event.alert
        elif isinstance(event, AlertCleared):
            self.active.pop(event.key, None)

    def raise_(self, alert: Alert) -> None:
        self._emit(AlertRaised(alert))

    def clear(self, key: str, why: str = "") -> None:
        """Clear ``key`` if it is raised (``why``: `AlertCleared.why`)."""
        if key in self.active:
            self._emit(AlertCleared(key, why=why))

    def lane_gone(self, lane: str) -> None:
        """The lane's containers are gone: its alerts (FATAL, gate, canary) are over."""
        for key in [k for k, a in self.active.items() if a.subject == lane]:
            self.clear(key, LANE_GONE)

    def thrash(self, verdict: ThrashVerdict) -> None:
        """A node's memory verdict: raised from suspected up, again when it changes."""
        key = f"thrash:{verdict.node}"
        if verdict.level < ThrashLevel.SUSPECTED:
            self.clear(key)
            return
        alert = Alert(key, verdict.level.label, verdict.node, verdict.evidence,
                      verdict.next_step)
        old = self.active.get(key)
        if old is None or replace(old, notified=False) != alert:  # kept with its phoned mark
            self.raise_(alert)

    def canary(self, lane: str, verdict: CanaryVerdict | None) -> None:
        key = f"canary:{lane}"
        if verdict is not None and verdict.unresponsive:
            self.raise_(Alert(key, "unresponsive", lane, verdict.evidence, UNRESPONSIVE_NEXT))
        else:
            self.clear(key)

    def news(self, news: LaneNews) -> None:
        """A garbled/slow/failed gate or a predicted OOM as an alert; a gate that
        passes (or runs again) clears its lane's."""
        key = f"{news.kind}:{news.subject}"
        if news.alarming:
            self.raise_(Alert(key, news.kind if news.kind != "gate" else news.state,
                              news.subject, news.evidence, news.next_step))
        elif news.kind == "gate":
            self.clear(key)
