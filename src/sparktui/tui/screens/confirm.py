"""The modals in front of every destructive action: exactly what will run,
every guard verdict, Cancel by default, the name typed for power and stop;
and the refusal, with the reasons and their numbers."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from sparktui.ops.guards import Verdict
from sparktui.service.actions import ActionPreview, verdict_word

VERDICT_STYLES = {"PASS": "green", "WARN": "bold yellow", "OVERRIDDEN": "bold yellow",
                  "REFUSE": "bold red reverse"}


def verdict_text(verdicts: tuple[Verdict, ...]) -> Text:
    text = Text()
    for v in verdicts:
        word = verdict_word(v)
        text.append(f"{word:<6}", style=VERDICT_STYLES[word])
        text.append(f" {v.guard} {v.subject}: ", style="bold")
        text.append(f"{v.message}\n")
        if v.refused and v.override is not None:
            text.append(f"       (overridable from the CLI: --override {v.override.value})\n",
                        style="dim")
    return text


def plan_text(preview: ActionPreview) -> Text:
    text = Text()
    for i, step in enumerate(preview.steps, 1):
        text.append(f"{i:2}. {step.step} ", style="bold")
        text.append(f"[{step.target}]: {step.action}\n")
    text.append("nodes: ", style="bold")
    text.append(", ".join(preview.nodes) or "—")
    if preview.entities:
        text.append("   Home Assistant: ", style="bold")
        text.append(", ".join(preview.entities))
    return text


class ConfirmActionScreen(ModalScreen[bool]):
    """Dismisses True only after Confirm with the exact name typed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="confirm-cancel")]

    def __init__(self, preview: ActionPreview) -> None:
        super().__init__(classes="action-modal")
        self.preview = preview

    def compose(self) -> ComposeResult:
        p = self.preview
        with Vertical(id="dialog"):
            yield Label(p.title, id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield Label("What will happen", classes="section")
                yield Static(plan_text(p), id="plan")
                yield Label("Guards", classes="section")
                yield Static(verdict_text(p.report.verdicts), id="verdicts")
            if p.confirmation.typed:
                yield Label(p.confirmation.reason, classes="section")
                yield Input(placeholder=f"type {p.target} to confirm", id="typed",
                            select_on_focus=False)
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button(f"Confirm {p.kind}", id="confirm", variant="error",
                             disabled=p.confirmation.typed)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()
        for inp in self.query(Input):
            inp.cursor_blink = False

    def _typed_ok(self) -> bool:
        if not self.preview.confirmation.typed:
            return True
        return self.preview.confirmation.accepts(self.query_one("#typed", Input).value)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#confirm", Button).disabled = not self._typed_ok()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self._typed_ok():
            self.dismiss(True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm" and self._typed_ok())

    def action_cancel(self) -> None:
        self.dismiss(False)


class RefusalScreen(ModalScreen[None]):
    """A guard said no: the reasons with their numbers, and nothing to confirm."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="refusal-close")]

    def __init__(self, preview: ActionPreview) -> None:
        super().__init__(classes="action-modal refusal")
        self.preview = preview

    def compose(self) -> ComposeResult:
        p = self.preview
        with Vertical(id="dialog"):
            yield Label(f"REFUSED: {p.title}", id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield Label("Why", classes="section")
                yield Static(verdict_text(p.refusals), id="reasons")
                others = tuple(v for v in p.report.verdicts if not v.refused)
                if others:
                    yield Label("Other guards", classes="section")
                    yield Static(verdict_text(others), id="other-verdicts")
                yield Label("Would have run", classes="section")
                yield Static(plan_text(p), id="plan")
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", id="close", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
