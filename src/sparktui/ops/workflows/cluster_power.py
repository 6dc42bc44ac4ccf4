"""``power cluster on|off CLUSTER``: the seeds' end of night ("power the
cluster OFF when the tests are done") and its morning.

On: the cluster's shared switches first (the fabric is invisible without
``sw6_mt``), then each node's plug, then every node is waited for. Off: each
node's plug, then the shared switches last, and only a switch no node outside
this cluster depends on. Protected nodes are skipped; a node still running
containers refuses the power-off (stop its lanes first).
"""

from __future__ import annotations

from collections.abc import Sequence

from sparktui.core.state import NodeSnapshot
from sparktui.ops import guards
from sparktui.ops.context import OpsContext
from sparktui.ops.workflows.power import _power, plug_action, wait_back
from sparktui.ops.workflows.runner import PlannedStep, WorkflowResult, WorkflowRun, together


def plan_steps(ctx: OpsContext, p: guards.ClusterPowerPlan) -> list[PlannedStep]:
    config = ctx.config
    steps = [PlannedStep("switch on", e, plug_action(e, True)) for e in p.switches_before]
    for n in p.nodes:
        e = config.nodes[n].switch
        steps.append(PlannedStep("plug on" if p.on else "plug off", e, plug_action(e, p.on)))
    if p.on:
        steps += [PlannedStep("back", n, "wait for liveness, SSH, re-check") for n in p.nodes]
    steps += [PlannedStep("switch off", e, plug_action(e, False)) for e in p.switches_after]
    return steps


def busy_nodes(snapshot_nodes: Sequence[NodeSnapshot]) -> list[guards.Verdict]:
    """A power-off refuses a node that still runs containers."""
    out = []
    for snap in snapshot_nodes:
        if snap.probe is None:
            continue
        running = [c.name for c in snap.probe.running_containers]
        if running:
            out.append(guards.Verdict("node-busy", snap.node, False,
                                      f"{snap.node} still runs {', '.join(running)} -> stop "
                                      f"its lanes first (`sparktui stop LANE`)"))
    return out


async def cluster_power(ctx: OpsContext, cluster: str, on: bool) -> WorkflowResult:
    p = guards.plan_cluster_power(ctx.config, cluster, on, ctx.locks.holders())
    report = p.report
    if ctx.power is None:
        report = guards.GuardReport((*report.verdicts, guards.Verdict(
            "home-assistant", cluster, False,
            f"Home Assistant is not available: {ctx.power_error}")))
    if not on and p.nodes:
        snap = await ctx.snapshot(list(p.nodes))
        report = guards.GuardReport((*report.verdicts, *busy_nodes(list(snap.nodes))))
    kind = f"cluster-power-{'on' if on else 'off'}"
    async with WorkflowRun(ctx, kind, cluster, plan=plan_steps(ctx, p),
                           detail={"nodes": list(p.nodes),
                                   "switches": [*p.switches_before, *p.switches_after]}) as run:
        run.guards(report)
        run.lock(list(p.nodes))
        power = _power(ctx)
        for entity in p.switches_before:
            await run.step("switch on", entity, plug_action(entity, True),
                           lambda e=entity: power.turn(e, True),
                           describe=lambda s: f"{s.entity} confirmed {s.state}")
        for node in p.nodes:
            entity = ctx.config.nodes[node].switch
            await run.step("plug on" if on else "plug off", entity, plug_action(entity, on),
                           lambda e=entity: power.turn(e, on),
                           describe=lambda s: f"{s.entity} confirmed {s.state}")
        found: dict[str, object] = {}
        if on:
            results = await together(*(wait_back(run, n) for n in p.nodes))
            found = {n: r["summary"] for n, r in zip(p.nodes, results, strict=True)}
        for entity in p.switches_after:
            await run.step("switch off", entity, plug_action(entity, False),
                           lambda e=entity: power.turn(e, False),
                           describe=lambda s: f"{s.entity} confirmed {s.state}")
        skipped = [v.subject for v in report.warnings if v.guard == "protected-node"]
        kept = [v.subject for v in report.warnings if v.guard == "shared-switch"]
        message = (f"{cluster} powered {'on' if on else 'off'}: {', '.join(p.nodes) or 'no node'}"
                   + (f"; skipped (protected): {', '.join(skipped)}" if skipped else "")
                   + (f"; kept on (shared): {', '.join(kept)}" if kept else ""))
        run.finish(True, message, {"nodes": list(p.nodes), "skipped": skipped,
                                   "kept_on": kept, "back": found})
    return run.outcome()
