"""What the console remembers of alerts: the active ones (which the operator
has acknowledged, and when each was raised) and the recently cleared ones.

Plain data, no Textual: the alert line and the alerts list both read it, so
"the most severe unacknowledged alert" is decided here once.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sparktui.core.state import NodeSnapshot, NodeState
from sparktui.service.alerts import ALERT_LEVELS
from sparktui.service.events import Alert

SEVERITY = {level: i for i, level in enumerate(ALERT_LEVELS)}
"""An alert level's rank, most severe first (service/alerts.ALERT_LEVELS). An
acknowledgement holds until the alert gets worse."""
HISTORY = 50
"""Cleared alerts kept for the list (the journal and shift log keep the rest)."""


def severity(level: str) -> int:
    """``level``'s rank in SEVERITY; a level it does not know ranks after them."""
    return SEVERITY.get(level, len(SEVERITY))


@dataclass(frozen=True)
class Entry:
    alert: Alert
    raised_at: float
    """When the console first saw this key (epoch seconds, the service's clock)."""
    updated_at: float
    acked: bool = False
    cleared_at: float | None = None
    why_cleared: str = ""
    """Why it cleared, when its condition did not just end (`AlertCleared.why`:
    ``lane gone``; ``re-attached``)."""

    @property
    def rank(self) -> tuple[int, float, str]:
        return (severity(self.alert.level), -self.raised_at, self.alert.key)


class AlertBook:
    def __init__(self) -> None:
        self.active: dict[str, Entry] = {}
        self.cleared: deque[Entry] = deque(maxlen=HISTORY)

    def raised(self, alert: Alert, now: float) -> None:
        old = self.active.get(alert.key)
        if old is None:
            self.active[alert.key] = Entry(alert, now, now)
            return
        worse = severity(alert.level) < severity(old.alert.level)
        self.active[alert.key] = replace(old, alert=alert, updated_at=now,
                                         acked=old.acked and not worse)

    def cleared_key(self, key: str, now: float, why: str = "") -> None:
        entry = self.active.pop(key, None)
        if entry is not None:
            self.cleared.appendleft(replace(entry, cleared_at=now, why_cleared=why))

    def ranked(self) -> list[Entry]:
        """Active alerts, unacknowledged first, most severe first, newest first."""
        return sorted(self.active.values(), key=lambda e: (e.acked, e.rank))

    def unacked(self) -> list[Entry]:
        return [e for e in self.ranked() if not e.acked]

    def top(self) -> Entry | None:
        pending = self.unacked()
        return pending[0] if pending else None

    def acknowledge(self, key: str | None = None) -> list[str]:
        """Acknowledge one alert, or (no key) every active one; the keys
        acknowledged."""
        keys = [key] if key is not None else [e.alert.key for e in self.unacked()]
        done = []
        for k in keys:
            entry = self.active.get(k)
            if entry is not None and not entry.acked:
                self.active[k] = replace(entry, acked=True)
                done.append(k)
        return done


CLUSTER_LOST = "console:cluster-lost"
"""The console's own alert: no node answers it at all."""
SILENT = (NodeState.UNKNOWN, NodeState.UNREACHABLE)


def cluster_lost(nodes: Sequence[NodeSnapshot]) -> Alert | None:
    """Every node unknown or unreachable after one answered: what is gone is
    more likely this console's way to the cluster (network, endpoints, the
    simulator stopped) than eight nodes at once, and no node's own alert says
    so (a read-only console showed eight `unknown 44s` rows and nothing else).
    None while any node answers, or before any ever did."""
    answered = [s.last_ok_at for s in nodes if s.last_ok_at is not None]
    if not nodes or not answered or any(s.state not in SILENT for s in nodes):
        return None
    why = next((s.error for s in nodes if s.error), "")
    return Alert(CLUSTER_LOST, "unresponsive", "cluster",
                 (f"no node has answered since {clock_time(max(answered))}: "
                  f"{len(nodes)}/{len(nodes)} unknown or unreachable",
                  *([f"first error: {why[:160]}"] if why else [])),
                 "check this console's way to the nodes (network, VPN, the endpoints); "
                 "a simulator or demo that stopped: start it again")


def clock_time(epoch: float) -> str:
    """``22:47:03Z``: UTC, so a screen reads the same on every host."""
    return time.strftime("%H:%M:%SZ", time.gmtime(epoch))
