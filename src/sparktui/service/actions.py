"""Operator actions as the console shows them before they run: the ops
layer's `Plan` (the same object the CLI prints with ``--dry-run --json`` and
the run re-checks), the confirmation rule, and the workflow to start once
confirmed. Built by `ClusterService`; nothing here decides a guard or a step
itself (ops/guards.py and ops/workflows do)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sparktui.ops.confirm import Confirmation, confirmation_for
from sparktui.ops.guards import GuardReport, Verdict
from sparktui.ops.plan import Plan, PlannedStep
from sparktui.ops.workflows.runner import WorkflowResult

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
    plan: Plan | None = field(default=None, compare=False, repr=False)
    """The ops plan all of the above is read from (None only for views with no
    workflow behind them)."""

    @classmethod
    def of(cls, plan: Plan, title: str, run: RunWorkflow) -> ActionPreview:
        """The preview of ``plan``: its steps and verdicts as they are; ``run`` is
        kept only when the plan is allowed."""
        return cls(plan.workflow, plan.target, title, plan.steps, plan.report,
                   confirmation_for(plan.workflow, plan.target, plan.report), plan.nodes,
                   plan.entities, run if plan.allowed else None, plan)

    @property
    def allowed(self) -> bool:
        return self.report.allowed and self.run is not None

    @property
    def refusals(self) -> tuple[Verdict, ...]:
        return self.report.refused
