"""The alerts list: every active alert with its evidence, next step and time
(unacknowledged first), then the recently cleared ones and the console's last
messages. ``a`` acknowledges the highlighted alert."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from sparktui.service.events import Alert
from sparktui.tui.alertbook import AlertBook, Entry, clock_time

Notice = tuple[float, str, str, str]
"""(when, title, message, severity) of a console message."""


def entry_text(e: Entry) -> Text:
    a = e.alert
    text = Text()
    state = ("cleared " + clock_time(e.cleared_at) if e.cleared_at is not None
             else "acknowledged" if e.acked else "NEW")
    text.append(f"{a.level.upper()} ", style="bold reverse" if e.cleared_at is None else "dim")
    text.append(f"{a.subject}", style="bold")
    text.append(f"  raised {clock_time(e.raised_at)}, updated {clock_time(e.updated_at)}"
                f"  [{state}]" + ("  [notified]" if a.notified else ""))
    for line in a.evidence:
        text.append(f"\n  evidence: {line}")
    if a.next_step:
        text.append("\n  next: ", style="bold")
        text.append(a.next_step)
    return text


class AlertsScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,exclamation_mark", "close", "Close", id="alerts-close"),
        Binding("a", "ack", "Acknowledge", id="alerts-ack"),
        Binding("b", "bundle", "Bundle", id="alerts-bundle"),
    ]

    def __init__(self, book: AlertBook, notices: Sequence[Notice],
                 on_ack: Callable[[str], None],
                 on_bundle: Callable[[Alert], None] | None = None) -> None:
        """``on_bundle``: write an incident bundle of the alert's lane or node
        (None: this console offers none, e.g. a replay)."""
        super().__init__(classes="info-modal alerts-modal")
        self.book = book
        self.notices = notices
        self.on_ack = on_ack
        self.on_bundle = on_bundle

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Alerts", id="dialog-title")
            yield OptionList(*self._options(), id="alert-list")
            yield Label("a: acknowledge   " + ("b: incident bundle   " if self.on_bundle
                                                   else "")
                        + "↑↓ / page keys: move   escape: close", classes="dialog-hint")

    def _options(self) -> list[Option]:
        out = [Option(entry_text(e), id=e.alert.key) for e in self.book.ranked()]
        if not out:
            out.append(Option(Text("no active alerts", style="dim"), id="-none",
                              disabled=True))
        out += [Option(entry_text(e), id=f"-cleared{i}", disabled=True)
                for i, e in enumerate(self.book.cleared)]
        for i, (at, title, message, _) in enumerate(self.notices):
            out.append(Option(Text(f"{clock_time(at)} {title + ': ' if title else ''}"
                                   f"{message}", style="dim"), id=f"-notice{i}",
                              disabled=True))
        return out

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def _highlighted_key(self) -> str | None:
        olist = self.query_one(OptionList)
        if olist.highlighted is None:
            return None
        key = olist.get_option_at_index(olist.highlighted).id
        return None if key is None or key.startswith("-") else key

    def action_bundle(self) -> None:
        """The bundle is written in the background; its path ends on the notice line."""
        key = self._highlighted_key()
        if self.on_bundle is None or key is None or key not in self.book.active:
            return
        self.on_bundle(self.book.active[key].alert)

    def action_ack(self) -> None:
        olist = self.query_one(OptionList)
        key = self._highlighted_key()
        if key is None:
            return
        self.on_ack(key)
        highlighted = olist.highlighted
        olist.set_options(self._options())
        if highlighted is not None:
            olist.highlighted = min(highlighted, olist.option_count - 1)

    def action_close(self) -> None:
        self.dismiss(None)
