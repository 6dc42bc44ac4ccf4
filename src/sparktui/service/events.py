"""What the service reports up to the console, as plain frozen dataclasses.

Named in the past tense: each one says something that has happened. The TUI
wraps them in Textual messages; tests read them from a list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sparktui.core.state import HistoryPoint, NodeSnapshot
from sparktui.core.thrash import ThrashVerdict
from sparktui.ops.events import WorkflowEvent
from sparktui.service.lanes import LaneView
from sparktui.watch.follower import LogLine


@dataclass(frozen=True)
class NodeSampled:
    snapshot: NodeSnapshot
    verdict: ThrashVerdict | None
    last_point: HistoryPoint | None
    """The newest memory history point (None when the probe failed)."""


@dataclass(frozen=True)
class LaneChanged:
    lane: LaneView


@dataclass(frozen=True)
class LaneGone:
    name: str


@dataclass(frozen=True)
class LogLinesArrived:
    lane: str
    rank: int
    lines: tuple[LogLine, ...]
    end: int
    """Lines of this rank delivered so far, these included: a reader that
    loaded `ClusterService.log_tail` up to N skips what it already has."""


@dataclass(frozen=True)
class Alert:
    """Something the operator must see now, with its evidence and next step."""

    key: str
    """One alert per key (``thrash:dgx6``, ``fatal:lane``); a newer one replaces it."""
    level: str
    """One of service/alerts.ALERT_LEVELS (``thrash``, ``fatal``...)."""
    subject: str
    evidence: tuple[str, ...]
    next_step: str
    notified: bool = False
    """A message about it reached the operator's phone ([notify])."""


@dataclass(frozen=True)
class AlertRaised:
    alert: Alert
    at: float | None = None
    """When it happened, for a reader told later (a replay: its recorded time;
    after a seek, when the alert was first raised); None: now."""


LANE_GONE = "lane gone"
"""`AlertCleared.why` of a lane's alerts once its containers are gone: what
they were about no longer runs."""


@dataclass(frozen=True)
class AlertCleared:
    key: str
    at: float | None = None
    """As `AlertRaised.at`."""
    why: str = ""
    """Why it cleared when its condition did not just end (`LANE_GONE`)."""


@dataclass(frozen=True)
class WorkflowProgressed:
    """A workflow started, passed a step or finished (ops/events.py)."""

    event: WorkflowEvent


ServiceEvent = (NodeSampled | LaneChanged | LaneGone | LogLinesArrived | AlertRaised
                | AlertCleared | WorkflowProgressed)
Sink = Callable[[ServiceEvent], None]
