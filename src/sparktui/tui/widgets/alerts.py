"""The alert line and the notice line: one row each in the layout, never
an overlay, so nothing they say can cover a table, a modal or the header.

The alert line shows the most severe unacknowledged alert and how many more
wait; the full list (evidence, next step, time) is the alerts screen (``!``).
The notice line shows the console's last message (what the stock toasts said).
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from sparktui.tui.alertbook import AlertBook, clock_time


def one_line(text: Text) -> Text:
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


class OneRow(Static):
    """A one-row Static that repaints only when its text changed, and never
    asks for a layout pass (its size cannot change): during an incident alerts
    arrive several times a second, each would otherwise relayout the screen."""

    _shown: Text | None = None

    def put(self, text: Text) -> None:
        if text != self._shown:
            self._shown = text
            self.update(one_line(text), layout=False)


class AlertLine(OneRow):
    """Exactly one row: empty-calm, or ``THRASH dgx6 22:47:03Z: evidence …``."""

    def show(self, book: AlertBook, *, ack_key: bool = True) -> None:
        """``ack_key``: ``a`` acknowledges here (a replay uses it to seek)."""
        top = book.top()
        pending = len(book.unacked())
        acked = len(book.active) - pending
        text = Text()
        self.set_class(top is not None, "-alert")
        if top is None:
            text.append(" no unacknowledged alerts" if not acked else
                        f" {acked} acknowledged alert(s) still active", style="dim")
            text.append("  ·  ! list", style="dim")
            self.put(text)
            return
        a = top.alert
        text.append(f" {a.level.upper()} ", style="bold reverse")
        if pending > 1:
            text.append(f" 1/{pending}", style="bold")
        text.append(f" {a.subject} ", style="bold")
        text.append(f"{clock_time(top.raised_at)} ")
        text.append("a:ack !:list " if ack_key else "!:list ", style="bold")
        if a.notified:
            text.append("[notified] ", style="dim")
        text.append(f"{(a.evidence or ('no evidence recorded',))[0]}")
        if a.next_step:
            text.append(f" next: {a.next_step}")
        self.put(text)


def result_notice(kind: str, target: str, message: str) -> str:
    """A finished workflow on one row, verdict first and its subject last: a
    cut at 80 columns then takes the subject, never the verdict. Workflow
    messages often open with their target (``X: PASSED …``, ``X serving on
    …``), which said once is enough."""
    verdict = message
    for head in (f"{target}: ", f"{target} "):
        if target and verdict.startswith(head):
            verdict = verdict[len(head):]
            break
    return f"{verdict} · {kind} {target}" if target else f"{verdict} · {kind}"


SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "information": ""}


class NoticeLine(OneRow):
    """The last message, on one row; it fades to dim after its time is up."""

    def say(self, message: str, title: str, severity: str) -> None:
        text = Text()
        if title:
            text.append(f"{title}: ", style=SEVERITY_STYLE.get(severity, "") or "bold")
        text.append(" ".join(message.split()), style=SEVERITY_STYLE.get(severity, ""))
        self.remove_class("-stale")
        self._shown = text  # a message said again is painted again (the operator asked)
        self.update(one_line(text), layout=False)

    def stale(self) -> None:
        self.add_class("-stale")
