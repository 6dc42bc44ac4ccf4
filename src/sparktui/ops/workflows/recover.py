"""``recover NODE``: the seeds' runbook as one workflow.

"Any node that stops answering SSH: 3 short retries (30 s), then HA plug
cycle of that node only, then re-check before continuing." Offered when the
thrash detector flags a node; never run by itself unless ``[power]
auto_recover`` is set (the caller decides; this module never starts it).
"""

from __future__ import annotations

from dataclasses import replace

from sparktui.core.errors import RemoteError
from sparktui.ops.context import OpsContext
from sparktui.ops.guards import GuardReport
from sparktui.ops.workflows.power import (
    SSH_CHECK,
    SSH_CHECK_TIMEOUT_S,
    cycle_in,
    plan_power,
    power_guards_probed,
)
from sparktui.ops.workflows.runner import PlannedStep, WorkflowResult, WorkflowRun


def plan_recover(ctx: OpsContext, node: str, off_seconds: float | None = None
                 ) -> list[PlannedStep]:
    t = ctx.config.thrash
    retries = [PlannedStep(f"ssh retry {i}", node,
                           f"`{SSH_CHECK}` (timeout {SSH_CHECK_TIMEOUT_S:g} s)"
                           + (f", then wait {t.ssh_retry_interval_s:g} s" if i < t.ssh_retries
                              else ""))
               for i in range(1, t.ssh_retries + 1)]
    return [*retries, *plan_power(ctx.config, node, "cycle", off_seconds)]


def recover_guards(report: GuardReport) -> GuardReport:
    """The SSH retries need no Home Assistant: its absence is a warning here (the
    plug-off step fails clearly if the retries do not bring the node back)."""
    return GuardReport(tuple(
        replace(v, passed=True, warning=True,
                message=v.message + " (needed only if the SSH retries fail)")
        if v.guard == "home-assistant" else v for v in report.verdicts))


async def recover(ctx: OpsContext, node: str, *,
                  off_seconds: float | None = None) -> WorkflowResult:
    t = ctx.config.thrash
    off_s = ctx.config.power.off_seconds if off_seconds is None else off_seconds
    report = recover_guards(await power_guards_probed(ctx, node, "recover (power cycle)"))
    steps = plan_recover(ctx, node, off_s) if node in ctx.config.nodes else []
    entity = ctx.config.nodes[node].switch if node in ctx.config.nodes else ""
    async with WorkflowRun(ctx, "recover", node, plan=steps,
                           detail={"node": node, "entity": entity, "off_seconds": off_s}) as run:
        run.guards(report)
        run.lock([node])
        for i in range(1, t.ssh_retries + 1):
            answered = await run.step(f"ssh retry {i}", node, f"`{SSH_CHECK}`",
                                      lambda: _ssh_answers(ctx, node),
                                      describe=lambda r: r or "no answer")
            if answered:
                run.finish(True, f"{node}: SSH answered on retry {i} ({answered}); no power "
                                 f"cycle needed", {"retries": i, "power_cycled": False})
                return run.outcome()
            if i < t.ssh_retries:
                await ctx.clock.sleep(t.ssh_retry_interval_s)
        found = await cycle_in(run, node, off_s)
        run.finish(True, f"power-cycled after {t.ssh_retries} SSH retries: {found['summary']}",
                   {**found, "retries": t.ssh_retries, "power_cycled": True})
    return run.outcome()


async def _ssh_answers(ctx: OpsContext, node: str) -> str:
    """The kernel release when SSH answers, "" when it does not."""
    try:
        result = await ctx.link(node).run(SSH_CHECK, SSH_CHECK_TIMEOUT_S)
    except RemoteError:
        return ""
    return f"kernel {result.stdout.strip()}" if result.exit_status == 0 else ""
