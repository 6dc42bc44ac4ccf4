"""The alert bar: thrash and fatal events, their evidence and the next step."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from sparktui.service.events import Alert

ORDER = {"fatal": 0, "thrash": 1, "thrash suspected": 2, "pressure": 3}


class AlertBar(Static):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.alerts: dict[str, Alert] = {}

    def raise_alert(self, alert: Alert) -> None:
        self.alerts[alert.key] = alert
        self._show()

    def clear_alert(self, key: str) -> None:
        if self.alerts.pop(key, None) is not None:
            self._show()

    def _show(self) -> None:
        self.display = bool(self.alerts)
        if not self.alerts:
            self.update("")
            return
        ranked = sorted(self.alerts.values(), key=lambda a: (ORDER.get(a.level, 9), a.key))
        top = ranked[0]
        text = Text()
        text.append(f" {top.level.upper()} ", style="bold reverse")
        text.append(f" {top.subject}: ", style="bold")
        text.append("; ".join(top.evidence[:3]) or "no evidence recorded")
        if top.notified:
            text.append("  [notified]", style="dim")
        if top.next_step:
            text.append("\n → next: ", style="bold")
            text.append(top.next_step)
        if len(ranked) > 1:
            text.append(f"  (+{len(ranked) - 1} more: "
                        + ", ".join(f"{a.level} {a.subject}" for a in ranked[1:4]) + ")")
        self.update(text)
