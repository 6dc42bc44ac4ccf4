"""The one route into every workflow: ``prepare`` (observe, then plan) and
``execute`` (observe and plan again, stop if anything the operator saw changed,
enforce the fresh verdicts, run the steps).

A key press in the console and a CLI command both call ``prepare`` for the plan
they show and ``execute`` with that same plan once it is confirmed.
"""

from __future__ import annotations

from sparktui.ops.context import OpsContext
from sparktui.ops.guards import GuardReport, Verdict
from sparktui.ops.observe import observe
from sparktui.ops.plan import Plan, Workflow
from sparktui.ops.workflows.runner import WorkflowResult, WorkflowRun


async def prepare(ctx: OpsContext, workflow: Workflow) -> Plan:
    """The plan from one fresh observation: every step and every verdict."""
    return workflow.plan(await observe(ctx, workflow.needs(ctx.config)))


async def execute(ctx: OpsContext, confirmed: Plan) -> WorkflowResult:
    """Run the workflow the operator confirmed as ``confirmed``. Before the first
    step that changes anything the guards are evaluated again on fresh state: if
    a verdict or a step differs from what was confirmed, nothing runs and the
    result says what changed."""
    workflow = confirmed.source
    fresh = await prepare(ctx, workflow)
    async with WorkflowRun(ctx, fresh.workflow, fresh.target, plan=fresh.steps,
                           detail=fresh.detail) as run:
        changes = confirmed.changes(fresh)
        report = fresh.report
        if changes:
            report = GuardReport((*report.verdicts, Verdict(
                "plan-changed", fresh.target, False,
                "the situation changed since the plan was shown: " + "; ".join(changes)
                + " -> look at the new plan and confirm again")))
        run.guards(report)
        await workflow.run(run, fresh)
    return run.outcome()
