"""The progress events every workflow emits (the TUI and the CLI both consume them).

A workflow is given one ``emit`` callable (``Callable[[WorkflowEvent], None]``)
and calls it, synchronously and in order, for each of these:

``WorkflowStarted`` -> (``GuardsEvaluated``) -> for each step
``StepStarted`` -> ``StepProgressed``* -> ``StepFinished`` -> ... ->
``WorkflowFinished`` (always last, also on failure or cancellation).

Events are frozen dataclasses named in the past tense; each carries the
workflow id (the journal's ``wf``) so a consumer can route them. The CLI
prints them on stderr (``format_event``); the TUI posts them as messages.
An ``emit`` must not block or raise: the workflow does not wait for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkflowEvent:
    wf: str
    """Workflow id, the same as in the journal."""
    at: float
    """Wall-clock time (epoch s) from the workflow's clock."""


@dataclass(frozen=True)
class WorkflowStarted(WorkflowEvent):
    kind: str
    """serve, stop, power-cycle, power-on, power-off, recover, cluster-power-on|off."""
    target: str
    steps: tuple[str, ...] = ()
    """The planned steps' descriptions, in order (the confirm modal's "what will happen")."""


@dataclass(frozen=True)
class GuardsEvaluated(WorkflowEvent):
    passed: tuple[str, ...]
    refused: tuple[str, ...]
    """Messages of the refusals that were not overridden (the workflow stops)."""
    overridden: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepStarted(WorkflowEvent):
    step: str
    target: str
    action: str
    """What runs: the exact command, HA call or wait."""


@dataclass(frozen=True)
class StepProgressed(WorkflowEvent):
    step: str
    target: str
    message: str


@dataclass(frozen=True)
class StepFinished(WorkflowEvent):
    step: str
    target: str
    ok: bool
    message: str
    seconds: float


@dataclass(frozen=True)
class WorkflowFinished(WorkflowEvent):
    kind: str
    target: str
    ok: bool
    message: str
    detail: dict[str, object] = field(default_factory=dict)


Emit = Callable[[WorkflowEvent], None]


def ignore(event: WorkflowEvent) -> None:
    """An ``emit`` that drops every event."""


def format_event(event: WorkflowEvent) -> str | None:
    """One line for a terminal; None for events not worth a line."""
    if isinstance(event, WorkflowStarted):
        return f"{event.kind} {event.target}: {len(event.steps)} step(s)"
    if isinstance(event, GuardsEvaluated):
        # one line: the verdicts themselves are in the plan shown before, and a
        # refusal's text ends the workflow (WorkflowFinished)
        counts = [f"{len(event.passed)} passed"]
        for n, what in ((len(event.warnings), "warning(s)"),
                        (len(event.overridden), "overridden"), (len(event.refused), "refused")):
            if n:
                counts.append(f"{n} {what}")
        lines = [f"  guards: {', '.join(counts)}"]
        lines += [f"  OVERRIDDEN: {m}" for m in event.overridden]
        return "\n".join(lines)
    if isinstance(event, StepStarted):
        return f"  -> {event.step} [{event.target}]: {event.action}"
    if isinstance(event, StepProgressed):
        return f"     {event.step} [{event.target}]: {event.message}"
    if isinstance(event, StepFinished):
        mark = "ok" if event.ok else "FAILED"
        return f"  <- {event.step} [{event.target}] {mark} ({event.seconds:.1f} s): {event.message}"
    if isinstance(event, WorkflowFinished):
        return f"{event.kind} {event.target}: {'done' if event.ok else 'FAILED'}: {event.message}"
    return None
