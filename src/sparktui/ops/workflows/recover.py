"""``recover NODE``: the seeds' runbook as one workflow.

"Any node that stops answering SSH: 3 short retries (30 s), then HA plug
cycle of that node only, then re-check before continuing." A node that
answers a retry is left alone (no cycle), so the cycle, when it comes, is a
hard cut of a node that cannot shut itself down, and the plan says so
(issue 15). Offered when the
thrash detector flags a node; never run by itself unless ``[power]
auto_recover`` is set (the caller decides; this module never starts it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sparktui.core.config import Config
from sparktui.core.errors import RemoteError
from sparktui.ops import guards
from sparktui.ops.context import OpsContext
from sparktui.ops.guards import GuardReport
from sparktui.ops.plan import OpsState, Plan, PlannedStep
from sparktui.ops.workflows.power import (
    SSH_CHECK,
    SSH_CHECK_TIMEOUT_S,
    NodeCycle,
    cycle_in,
    plan_power,
    shutdown_first,
)
from sparktui.ops.workflows.runner import WorkflowRun


def plan_recover(config: Config, node: str, off_seconds: float) -> list[PlannedStep]:
    t = config.thrash
    retries = [PlannedStep(f"ssh retry {i}", node,
                           f"`{SSH_CHECK}` (timeout {SSH_CHECK_TIMEOUT_S:g} s)"
                           + (f", then wait {t.ssh_retry_interval_s:g} s" if i < t.ssh_retries
                              else ""))
               for i in range(1, t.ssh_retries + 1)]
    return [*retries, *shutdown_first(config, node, plan_power(config, node, "cycle",
                                                                off_seconds), HARD_WHY)]


HARD_WHY = ("reached only when no SSH retry answered: a node that does not answer SSH "
            "cannot shut itself down")
"""Why a recover's plug cycle is never graceful (a node that answers is left alone)."""


def recover_guards(report: GuardReport) -> GuardReport:
    """The SSH retries need no Home Assistant: its absence is a warning here (the
    plug-off step fails clearly if the retries do not bring the node back)."""
    return GuardReport(tuple(
        replace(v, passed=True, warning=True,
                message=v.message + " (needed only if the SSH retries fail)")
        if v.guard == "home-assistant" and not v.passed else v for v in report.verdicts))


@dataclass(frozen=True)
class Recover(NodeCycle):
    """``recover NODE``."""

    kind: str = field(default="recover", init=False)

    def plan(self, state: OpsState) -> Plan:
        config = state.config
        off_s = self.off_s(config)
        report = recover_guards(guards.evaluate_power(
            config, self.node, "recover (power cycle)", state.holders(),
            state.snapshot.get(self.node), state.power_error))
        known = self.node in config.nodes
        entity = config.nodes[self.node].switch if known else ""
        steps = plan_recover(config, self.node, off_s) if known else []
        return Plan(self.kind, self.node, report, tuple(steps), self, nodes=(self.node,),
                    entities=(entity,) if entity else (),
                    detail={"node": self.node, "entity": entity, "off_seconds": off_s,
                            "hard_cut": HARD_WHY})

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        ctx, node = run.ctx, self.node
        t = ctx.config.thrash
        run.lock([node])
        for i in range(1, t.ssh_retries + 1):
            answered = await run.step(f"ssh retry {i}", node, f"`{SSH_CHECK}`",
                                      lambda: _ssh_answers(ctx, node),
                                      describe=lambda r: r or "no answer")
            if answered:
                run.finish(True, f"{node}: SSH answered on retry {i} ({answered}); no power "
                                 f"cycle needed", {"retries": i, "power_cycled": False})
                return
            if i < t.ssh_retries:
                await ctx.clock.sleep(t.ssh_retry_interval_s)
        found = await cycle_in(run, node, self.off_s(ctx.config))
        run.finish(True, f"power-cycled after {t.ssh_retries} SSH retries: {found['summary']}",
                   {**found, "retries": t.ssh_retries, "power_cycled": True})


async def _ssh_answers(ctx: OpsContext, node: str) -> str:
    """The kernel release when SSH answers, "" when it does not."""
    try:
        result = await ctx.link(node).run(SSH_CHECK, SSH_CHECK_TIMEOUT_S)
    except RemoteError:
        return ""
    return f"kernel {result.stdout.strip()}" if result.exit_status == 0 else ""
