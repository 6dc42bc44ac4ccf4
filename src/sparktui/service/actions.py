"""Operator actions as the console shows them before they run: the ops
layer's planned steps and guard report, the confirmation rule, and the
workflow to start once confirmed. Built by `ClusterService`; nothing here
decides a guard or a step itself (ops/guards.py and ops/workflows do)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sparktui.ops.confirm import Confirmation
from sparktui.ops.guards import GuardReport, Verdict
from sparktui.ops.workflows.runner import PlannedStep, WorkflowResult

RunWorkflow = Callable[[], Awaitable[WorkflowResult]]


@dataclass(frozen=True)
class ActionPreview:
    kind: str
    """serve, stop, power-cycle, recover, cluster-power-on|off, resume, runlock-close."""
    target: str
    title: str
    steps: tuple[PlannedStep, ...]
    """Exactly what will run, in order."""
    report: GuardReport
    confirmation: Confirmation
    nodes: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    """Home Assistant entities the action switches."""
    run: RunWorkflow | None = field(default=None, compare=False, repr=False)
    """Starts the workflow; None when the action is refused."""

    @property
    def allowed(self) -> bool:
        return self.report.allowed and self.run is not None

    @property
    def refusals(self) -> tuple[Verdict, ...]:
        return self.report.refused


def verdict_word(v: Verdict) -> str:
    """How a verdict reads without colour."""
    if v.refused:
        return "REFUSE"
    if v.overridden:
        return "OVERRIDDEN"
    if v.warning:
        return "WARN"
    return "PASS"
