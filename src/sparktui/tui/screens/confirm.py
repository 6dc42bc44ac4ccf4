"""The modals in front of every destructive action, summary first: the guard
verdicts (passed / refused / overridable) and every planned step, numbered,
at the top, the exact commands behind a details toggle; Cancel by default, the
name typed for power, stop and overrides (focus starts in the name field);
and the refusal, with the reasons and their numbers."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static
from textual.widgets.button import ButtonVariant

from sparktui.ops.guards import GuardReport, Verdict
from sparktui.ops.plan import PlannedStep, outcome
from sparktui.service.actions import ActionPreview

VERDICT_STYLES = {"PASS": "green", "WARN": "bold yellow", "OVERRIDDEN": "bold yellow",
                  "REFUSE": "bold red reverse"}


def verdict_line(text: Text, v: Verdict) -> None:
    word = outcome(v)
    text.append(f"{word:<6}", style=VERDICT_STYLES[word])
    text.append(f" {v.guard} {v.subject}: ", style="bold")
    text.append(f"{v.message}\n")
    if v.refused and v.override is not None:
        text.append(f"       overridable: {v.override.value}\n", style="bold")


def verdict_text(verdicts: tuple[Verdict, ...]) -> Text:
    text = Text()
    for v in verdicts:
        verdict_line(text, v)
    text.rstrip()
    return text


def grouped(verdicts: tuple[Verdict, ...] | list[Verdict]) -> str:
    """``protected-node ×4 · fit (override) · image dgx5``: one entry per guard."""
    by_guard: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by_guard.setdefault(v.guard, []).append(v)
    parts = []
    for guard, vs in by_guard.items():
        part = guard + (f" {vs[0].subject}" if len(vs) == 1 and "@" not in vs[0].subject
                        else f" ×{len(vs)}" if len(vs) > 1 else "")
        if all(v.override is not None for v in vs):
            part += " (override)"
        parts.append(part)
    return " · ".join(parts)


def grouped_verdict_text(verdicts: tuple[Verdict, ...] | list[Verdict]) -> Text:
    """One verdict in full per guard and outcome; the same rule on other
    subjects as one "also:" line (four protected nodes read as one reason)."""
    groups: dict[tuple[str, str], list[Verdict]] = {}
    for v in verdicts:
        groups.setdefault((v.guard, outcome(v)), []).append(v)
    text = Text()
    for vs in groups.values():
        verdict_line(text, vs[0])
        if len(vs) > 1:
            text.append(f"       also: {', '.join(v.subject for v in vs[1:])}\n", style="bold")
    text.rstrip()
    return text


def verdict_summary(report: GuardReport, *, refusals_shown: bool = False) -> Text:
    """A count line, each verdict that is not a plain pass in full (the
    refusals only when not already shown above), and the passes as one line
    of names."""
    vs = report.verdicts
    refused = [v for v in vs if v.refused]
    overridable = [v for v in refused if v.override is not None]
    notable = [v for v in vs if not v.passed or v.warning or v.overridden]
    passed = [v for v in vs if v.passed and not v.warning and not v.overridden]
    text = Text()
    text.append(f"{len(passed)} passed", style="green")
    text.append(" · ")
    text.append(f"{len(refused)} refused", style="bold red" if refused else "")
    text.append(f" ({len(overridable)} overridable)" if refused else "")
    others = len(notable) - len(refused)
    if others:
        text.append(f" · {others} warning/overridden", style="bold yellow")
    text.append("\n")
    shown = [v for v in notable if not (refusals_shown and v.refused)]
    if shown:
        text.append_text(grouped_verdict_text(shown))
        text.append("\n")
    if passed:
        text.append("PASS  ", style="green")
        text.append(", ".join(sorted({f"{v.guard}" for v in passed})), style="dim")
    text.rstrip()
    return text


def plan_parts(preview: ActionPreview) -> tuple[tuple[PlannedStep, ...], GuardReport]:
    """The steps and verdicts of the ops `Plan` behind the preview (the object
    the CLI prints and the run re-checks); the preview's copy when it has none."""
    plan = preview.plan
    return (plan.steps, plan.report) if plan is not None else (preview.steps, preview.report)


def steps_flowing(preview: ActionPreview) -> Text:
    """Every step, numbered, as one flowing paragraph, each target said when
    it changes: a confirm's plan, a refusal's "would have run", whole in three
    rows at 80x24 (one line per step put all but the first few below the fold)."""
    steps = plan_parts(preview)[0]
    text = Text()
    where = ""
    for i, step in enumerate(steps, 1):
        text.append(" · " if i > 1 else "")
        text.append(f"{i}. {step.step}", style="bold")
        if step.target != where:
            text.append(f" [{step.target}]")
            where = step.target
    if not steps:
        text.append("no step", style="dim")
    return text


def plan_text(preview: ActionPreview) -> Text:
    """Every step with its exact command, Home Assistant call or wait: the
    CLI's "what will happen" lines (PlannedStep.describe)."""
    text = Text()
    for i, step in enumerate(plan_parts(preview)[0], 1):
        text.append(f"{i:2}. ", style="bold")
        text.append(f"{step.describe()}\n")
    text.rstrip()
    return text


DETAILS_HINT = "c commands · PgDn"


class MarkedButton(Button):
    """A button that says it has the focus with a ``▶`` (the stock cue is
    reverse colours only, which read as "highlighted" on every button)."""

    def __init__(self, label: str, *, id: str, variant: ButtonVariant = "default",
                 disabled: bool = False) -> None:
        super().__init__(label, id=id, variant=variant, disabled=disabled, compact=True)
        self.text = label

    def on_focus(self) -> None:
        self.label = f"▶ {self.text}"

    def on_blur(self) -> None:
        self.label = self.text


class ActionModal(ModalScreen[bool]):
    """What the confirm and the refusal share: a scrollable body whose page
    keys work wherever the focus is, and the commands behind c (or F2)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # a letter too: F1-F4 do not reach the console through tmux 3.4 or mosh
        Binding("f2,c", "details", "Commands", id="modal-details"),
        Binding("pageup", "scroll_body('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll_body('page_down')", "Page down", show=False),
        Binding("up", "scroll_body('scroll_up')", "Up", show=False),
        Binding("down", "scroll_body('scroll_down')", "Down", show=False),
    ]

    def __init__(self, preview: ActionPreview, classes: str) -> None:
        super().__init__(classes=classes)
        self.preview = preview

    def details(self) -> ComposeResult:
        yield Label(f"Commands ({DETAILS_HINT} hides)", classes="section details")
        yield Static(plan_text(self.preview), id="plan", classes="details")
        yield Label("Every guard", classes="section details")
        yield Static(verdict_text(plan_parts(self.preview)[1].verdicts), id="all-verdicts",
                     classes="details")

    def on_mount(self) -> None:
        for w in self.query(".details"):
            w.display = False

    def action_details(self) -> None:
        shown = False
        for w in self.query(".details"):
            w.display = shown = not w.display
        if shown:
            self.query_one("#plan").scroll_visible(top=True, animate=False)

    async def action_scroll_body(self, how: str) -> None:
        await self.query_one("#dialog-body").run_action(how)


class ConfirmActionScreen(ActionModal):
    """Dismisses True only on Confirm (or Enter in the name field) with the
    exact name typed; a plain confirm starts on Cancel."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *ActionModal.BINDINGS,
        Binding("escape", "cancel", "Cancel", id="confirm-cancel")]

    def __init__(self, preview: ActionPreview, heads_up: str = "") -> None:
        """``heads_up``: a line said before the guards (a protected lane's serve)."""
        super().__init__(preview, "action-modal")
        self.heads_up = heads_up

    def compose(self) -> ComposeResult:
        p = self.preview
        typed = p.confirmation.typed
        with Vertical(id="dialog"):
            yield Label(p.title, id="dialog-title")
            with VerticalScroll(id="dialog-body", can_focus=False):
                if self.heads_up:
                    yield Static(Text(f"! {self.heads_up}", style="bold"), id="heads-up")
                yield Label("Guards", classes="section" + ("" if self.heads_up else " first"))
                yield Static(verdict_summary(plan_parts(p)[1]), id="verdicts")
                yield Label(f"Plan ({len(plan_parts(p)[0])} steps)", classes="section")
                yield Static(steps_flowing(p), id="steps")
                yield from self.details()
            if typed:
                # what to do first, why last: a cut at 80 columns takes the why
                yield Label(f"type {p.target} and press enter: {p.confirmation.reason}",
                            id="typed-why")
                yield Input(placeholder=f"type {p.target} to confirm", id="typed",
                            select_on_focus=False, compact=True)
                yield Label("", id="typed-error")
            with Horizontal(id="dialog-buttons"):
                yield Label(f"esc · {DETAILS_HINT}", classes="dialog-hint")
                yield MarkedButton("Cancel", id="cancel")
                yield MarkedButton(f"Confirm {p.kind}", id="confirm", variant="error",
                                   disabled=typed)

    def on_mount(self) -> None:
        super().on_mount()
        if self.preview.confirmation.typed:
            box = self.query_one("#typed", Input)
            box.cursor_blink = False
            box.focus()
            self.query_one("#typed-error").display = False
        else:
            self.query_one("#cancel", Button).focus()

    def _typed_ok(self) -> bool:
        if not self.preview.confirmation.typed:
            return True
        return self.preview.confirmation.accepts(self.query_one("#typed", Input).value)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#confirm", Button).disabled = not self._typed_ok()
        self.query_one("#typed-error").display = False

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._typed_ok():
            self.dismiss(True)
            return
        error = self.query_one("#typed-error", Label)
        typed = event.value.strip()
        error.update(Text(f"'{typed}' is not {self.preview.target}: type the name exactly "
                          "(escape cancels)" if typed else
                          f"type {self.preview.target} first (escape cancels)",
                          style="bold red"))
        error.display = True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm" and self._typed_ok())

    def action_cancel(self) -> None:
        self.dismiss(False)


class RefusalScreen(ActionModal):
    """A guard said no: the reasons with their numbers first, nothing to confirm."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *ActionModal.BINDINGS,
        Binding("escape", "close", "Close", id="refusal-close"),
        Binding("o", "override", "Override", id="refusal-override")]

    def __init__(self, preview: ActionPreview, *, overridable: bool = False) -> None:
        super().__init__(preview, "action-modal refusal")
        self.overridable = overridable
        """Every refusal has an override and the action can be proposed again."""

    def compose(self) -> ComposeResult:
        p = self.preview
        with Vertical(id="dialog"):
            yield Label(f"REFUSED: {p.title}", id="dialog-title")
            with VerticalScroll(id="dialog-body", can_focus=False):
                yield Label(f"Why: {grouped(p.refusals)}", classes="section first")
                yield Static(grouped_verdict_text(p.refusals), id="reasons")
                # what it would have done before the guards that passed: at
                # 80x24 every step stays in view, the passes go below the fold
                yield Label(f"Would have run ({len(plan_parts(p)[0])} steps)",
                            classes="section")
                yield Static(steps_flowing(p), id="steps")
                yield Label("Guards", classes="section")
                yield Static(verdict_summary(plan_parts(p)[1], refusals_shown=True),
                             id="verdicts")
                yield from self.details()
            if self.overridable:
                names = ", ".join(sorted(o.value for o in p.report.needed_overrides()))
                yield Label(f"o: override {names} (you type {p.target}; journaled)",
                            id="override-hint")
            with Horizontal(id="dialog-buttons"):
                yield Label(f"esc · {DETAILS_HINT}", classes="dialog-hint")
                yield MarkedButton("Close", id="close")
                if self.overridable:
                    yield MarkedButton("Override…", id="override", variant="warning")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#close", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "override")

    def action_close(self) -> None:
        self.dismiss(False)

    def action_override(self) -> None:
        if self.overridable:
            self.dismiss(True)
