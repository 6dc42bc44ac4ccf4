"""Read-only modals: help, details of a node or lane, a fit report, pickers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Markdown, OptionList, Static
from textual.widgets.option_list import Option

from sparktui.ops.resume import Offer
from sparktui.tui.bindings import ACTION_IDS, all_bindings


class TextScreen(ModalScreen[None]):
    """A title and a text; escape or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", id="text-close")]

    def __init__(self, title: str, body: RenderableType, *, classes: str = "") -> None:
        super().__init__(classes=f"info-modal {classes}".strip())
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield Static(self.body, id="info-body")
            yield Label("escape: close   arrows / page keys: scroll", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#dialog-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)


class MarkdownScreen(TextScreen):
    """A Markdown document (the shift log), rendered, not shown raw."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield Markdown(str(self.body), id="info-body")
            yield Label("escape: close   arrows / page keys: scroll", classes="dialog-hint")


def help_text(read_only: bool) -> Group:
    """Every binding (the main screen's, the app's, the tables'), one row each;
    long descriptions wrap under their own column."""
    keys = Table.grid(padding=(0, 1))
    keys.add_column(justify="right", style="bold", no_wrap=True)
    keys.add_column(style="bold", no_wrap=True)
    keys.add_column(ratio=1)
    for b in all_bindings():
        if read_only and b.id in ACTION_IDS:
            continue
        keys.add_row(b.key_display or b.key.replace(",", " "), b.description, b.tooltip)
    keys.add_row("tab", "Move", "Next pane; arrows move inside it, enter shows details")
    keys.add_row("1-4", "Panes", "At 80x24 one pane shows at a time: the tab row says which")
    notes = Text()
    notes.append("\nCommands (: or ctrl+p) — ", style="bold")
    if read_only:
        notes.append("read-only: view commands only (fit, help, runlocks, shift log); the "
                     "action keys say so. Start a writable console without --read-only.\n")
    else:
        notes.append("serve, stop, power-cycle, recover, cluster power on/off, fit, "
                     "runlock list/close, shift log; in the demo, the scenario's trigger.\n")
    notes.append("\nWords, not only colours: STARVED / UNREACHABLE nodes, FAILED / STALLED "
                 "lanes, REFUSE verdicts, '!' marks fatal log lines, '*' a protected node "
                 "or lane, '›' a log line that goes on to the right.")
    return Group(keys, notes)


class HelpScreen(TextScreen):
    def __init__(self, read_only: bool) -> None:
        super().__init__("sparktui — keys" + (" (read-only)" if read_only else ""),
                         help_text(read_only), classes="help")


class PickerScreen(ModalScreen[str | None]):
    """Choose one option by keyboard; escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Cancel", id="picker-cancel")]

    def __init__(self, title: str, options: Sequence[tuple[str, str | Text]], *,
                 highlight: int = 0, hint: str = "enter: choose   escape: cancel") -> None:
        """``options``: (id, prompt) pairs; ``highlight``: the default's index."""
        super().__init__(classes="picker-modal")
        self.title_text = title
        self.options = options
        self.highlight = highlight
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            yield OptionList(*[Option(prompt, id=oid) for oid, prompt in self.options],
                             id="picker")
            yield Label(self.hint, classes="dialog-hint")

    def on_mount(self) -> None:
        olist = self.query_one(OptionList)
        olist.focus()
        if self.options:
            olist.highlighted = self.highlight

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_close(self) -> None:
        self.dismiss(None)


ResumeChoice = tuple[str, Offer]
"""("resume" or "close", the offer it is for)."""


class ResumeScreen(ModalScreen[ResumeChoice | None]):
    """Every unfinished workflow the journal holds, in one list (after a bad
    night one modal each piled up, each only closable): pick one, then
    complete it or close it; later leaves them all for now."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "later", "Later (all)", id="resume-later"),
        Binding("up", "move(-1)", "Previous", show=False, id="resume-up"),
        Binding("down", "move(1)", "Next", show=False, id="resume-down")]

    def __init__(self, offers: Sequence[Offer]) -> None:
        super().__init__(classes="action-modal")
        self.offers = list(offers)

    @staticmethod
    def line(offer: Offer) -> str:
        r = offer.record
        marks = [*(["stale"] if "stale:" in offer.what else []),
                 *([f"off: {', '.join(offer.plugs_off)}"] if offer.plugs_off else []),
                 *([] if offer.action else ["close only"])]
        return f"{r.workflow} {r.target}" + "".join(f" · {m}" for m in marks)

    def compose(self) -> ComposeResult:
        n, first = len(self.offers), self.offers[0].record
        title = (f"UNFINISHED: {first.workflow} {first.target}" if n == 1 else
                 f"UNFINISHED: {n} workflows the journal says never ended")
        with Vertical(id="dialog"):
            yield Label(title, id="dialog-title")
            yield OptionList(*[Option(self.line(o), id=o.record.wf) for o in self.offers],
                             id="resume-list")
            with VerticalScroll(id="dialog-body"):  # what it will do first: at 80x24
                yield Label("To complete it", classes="section first")  # it shows whole
                yield Static(id="resume-action")
                yield Label("What the journal says", classes="section")
                yield Static(id="info-body")
            with Horizontal(id="dialog-buttons"):
                yield Button("Later (all)", id="later", variant="primary")
                yield Button("Close it", id="close")
                yield Button("Complete it…", id="resume", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#resume-list", OptionList).highlighted = 0
        self.show(0)
        self.query_one("#later", Button).focus()

    @property
    def chosen(self) -> Offer:
        index = self.query_one("#resume-list", OptionList).highlighted
        return self.offers[index or 0]

    def show(self, index: int) -> None:
        o = self.offers[index]
        self.query_one("#info-body", Static).update(o.what.replace("; ", "\n"))
        self.query_one("#resume-action", Static).update(
            o.action or "nothing to redo: it can only be closed")
        self.query_one("#resume", Button).display = bool(o.action)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self.show(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # enter chooses the workflow; the buttons say what to do with it

    def action_move(self, by: int) -> None:
        olist = self.query_one("#resume-list", OptionList)
        olist.highlighted = max(0, min(len(self.offers) - 1, (olist.highlighted or 0) + by))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        choice = event.button.id
        self.dismiss(None if choice == "later" or choice is None else (choice, self.chosen))

    def action_later(self) -> None:
        self.dismiss(None)
