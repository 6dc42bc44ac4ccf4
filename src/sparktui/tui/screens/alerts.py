"""The alerts list: every active alert (unacknowledged first), then the
recently cleared ones and the console's last messages. ``a`` acknowledges the
highlighted alert, ``b`` bundles it.

At 80x24 a full entry (evidence, next step) takes a third of the box, so only
the highlighted entry is shown whole; the others are one line each (level,
subject, raised, state), so every alert stays in view and within reach of a
key. The highlighted entry carries a ``▶``
marker: the highlight must read without colour. Every entry can be
highlighted, cleared ones and messages too (to read them); ``a`` and ``b``
act only on active alerts. The cursor stops at either end instead of wrapping
(a wrap looked like a jump back to the first alert)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
from sparktui.tui.bindings import MODAL_NAV_BINDINGS

Notice = tuple[float, str, str, str]
"""(when, title, message, severity) of a console message."""

MARK = "▶ "
"""Before the highlighted entry (the rest get as many spaces)."""


def folded(lines: Sequence[str]) -> list[tuple[str, int]]:
    """Each distinct line once, in first-seen order, with how often it came
    (an engine's periodic stats line can be all of a fatal's last context)."""
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    return list(counts.items())


def entry_state(e: Entry) -> str:
    return ("cleared " + clock_time(e.cleared_at) + (f", {e.why_cleared}" if e.why_cleared else "")
            if e.cleared_at is not None
            else "acknowledged" if e.acked else "NEW")


def entry_text(e: Entry, *, full: bool = True) -> Text:
    """The entry whole (``full``), or its one-line summary: level, subject,
    when raised and its state (what the operator picks by)."""
    a = e.alert
    text = Text()
    text.append(f"{a.level.upper()} ", style="bold reverse" if e.cleared_at is None else "dim")
    text.append(f"{a.subject}", style="bold")
    if not full:
        text.append(f"  {clock_time(e.raised_at)} [{entry_state(e)}]")
        return text
    text.append(f"  [{entry_state(e)}]" + (" [notified]" if a.notified else "")
                + f"  raised {clock_time(e.raised_at)}, updated {clock_time(e.updated_at)}")
    # what to do before why: a FATAL's evidence (four long engine lines) put
    # its next step below the fold at 80x24
    if a.next_step:
        text.append("\n  next: ", style="bold")
        text.append(a.next_step)
    for line, count in folded(a.evidence):
        text.append(f"\n  evidence: {line}" + (f" ({count}x)" if count > 1 else ""))
    return text


@dataclass(frozen=True)
class Row:
    """One entry of the list: an alert (active or cleared) or a message."""

    entry: Entry | None
    notice: Notice | None = None

    @property
    def key(self) -> str | None:
        """The active alert's key (what ``a`` and ``b`` act on), else None."""
        e = self.entry
        return e.alert.key if e is not None and e.cleared_at is None else None

    def text(self, *, highlighted: bool) -> Text:
        if self.entry is not None:
            body = entry_text(self.entry, full=highlighted)
        elif self.notice is not None:
            at, title, message, _ = self.notice
            body = Text(f"{clock_time(at)} {title + ': ' if title else ''}{message}",
                        style="dim")
        else:
            body = Text("no active alerts", style="dim")
        text = Text(MARK if highlighted else " " * len(MARK), style="bold")
        text.append_text(body)
        return text


class AlertList(OptionList):
    """An OptionList whose cursor stops at either end."""

    def action_cursor_down(self) -> None:
        if self.highlighted is None or self.highlighted < self.option_count - 1:
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.highlighted is None or self.highlighted > 0:
            super().action_cursor_up()


class AlertsScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,exclamation_mark", "close", "Close", id="alerts-close"),
        Binding("a", "ack", "Acknowledge", id="alerts-ack"),
        Binding("b", "bundle", "Bundle", id="alerts-bundle"),
        *MODAL_NAV_BINDINGS,
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
        self.rows: list[Row] = []
        self._shown: int | None = None
        """The row drawn whole (the highlighted one)."""

    def compose(self) -> ComposeResult:
        self.rows = self._rows()
        with Vertical(id="dialog"):
            yield Label("Alerts", id="dialog-title")
            yield AlertList(*self._options(0), id="alert-list")
            yield Label("a ack  " + ("b bundle  " if self.on_bundle else "")
                        + "↑↓ PgUp PgDn move  esc close", classes="dialog-hint")

    def _rows(self) -> list[Row]:
        rows = [Row(e) for e in self.book.ranked()] or [Row(None)]
        rows += [Row(e) for e in self.book.cleared]
        rows += [Row(None, n) for n in self.notices]
        return rows

    def _options(self, highlighted: int | None) -> list[Option]:
        self._shown = highlighted
        return [Option(row.text(highlighted=i == highlighted)) for i, row in
                enumerate(self.rows)]

    def on_mount(self) -> None:
        olist = self.query_one(AlertList)
        olist.highlighted = 0
        olist.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """Fold the entry left, unfold the one highlighted."""
        olist = self.query_one(AlertList)
        new = event.option_index
        if new == self._shown:
            return
        if self._shown is not None and self._shown < len(self.rows):
            olist.replace_option_prompt_at_index(
                self._shown, self.rows[self._shown].text(highlighted=False))
        olist.replace_option_prompt_at_index(new, self.rows[new].text(highlighted=True))
        self._shown = new

    def _highlighted_key(self) -> str | None:
        highlighted = self.query_one(AlertList).highlighted
        return None if highlighted is None else self.rows[highlighted].key

    def action_bundle(self) -> None:
        """The bundle is written in the background; its path ends on the notice line."""
        key = self._highlighted_key()
        if self.on_bundle is None or key is None or key not in self.book.active:
            return
        self.on_bundle(self.book.active[key].alert)

    def action_ack(self) -> None:
        olist = self.query_one(AlertList)
        key = self._highlighted_key()
        if key is None:
            return
        self.on_ack(key)
        # the acknowledged alert moves below the unacknowledged ones: follow it
        self.rows = self._rows()
        at = next((i for i, r in enumerate(self.rows) if r.key == key), 0)
        olist.set_options(self._options(at))
        olist.highlighted = at

    def action_close(self) -> None:
        self.dismiss(None)
