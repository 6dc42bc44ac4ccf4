"""``power cluster on|off CLUSTER``: the seeds' end of night ("power the
cluster OFF when the tests are done") and its morning.

On: the cluster's shared switches first (the fabric is invisible without
``sw6_mt``), then each node's plug, then every node is waited for. Off: the
lanes running on the nodes are stopped first (every rank, under the guards of
``stop``: a protected lane refuses), then each node's plug, then the shared
switches last, and only a switch no node outside this cluster depends on.
Protected nodes are skipped.

Off is graceful for a node that answers (issue 15): every such node's plug is
read afresh first (issue 27: with HA answering 502 an off shut four nodes down,
then could not cut or restore their plugs), then ``systemctl poweroff``
over SSH, wait until SSH and liveness are gone (``[power]
poweroff_timeout_s``), then cut its plug, so filesystems and NAS mounts are
not lost mid-write. A node that is starved or unreachable is hard-cut and the
plan says why; ``--hard`` cuts every plug at once, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from sparktui.core.config import Config
from sparktui.ops import guards
from sparktui.ops.plan import Needs, OpsState, Plan, PlannedStep
from sparktui.ops.workflows.power import (
    GRACEFUL,
    OffPlan,
    _power,
    graceful_off_steps,
    hold_way_out,
    off_plan,
    plug_action,
    plug_check,
    plug_check_action,
    poweroff,
    stop_lanes_first,
    tell_plug,
    wait_back,
    wait_dark,
)
from sparktui.ops.workflows.runner import WorkflowRun, together


def plan_steps(config: Config, p: guards.ClusterPowerPlan,
               modes: Mapping[str, str] | None = None,
               stops: Sequence[PlannedStep] = ()) -> list[PlannedStep]:
    modes = modes or {}
    steps = [*stops, *(PlannedStep("switch on", e, plug_action(e, True))
                       for e in p.switches_before)]
    graceful = [n for n in p.nodes if not p.on and modes.get(n) == GRACEFUL]
    steps += [PlannedStep("plug check", config.nodes[n].switch,
                          plug_check_action(config.nodes[n].switch)) for n in graceful]
    steps += graceful_off_steps(config, graceful)
    for n in p.nodes:
        e = config.nodes[n].switch
        why = modes.get(n, GRACEFUL)
        steps.append(PlannedStep("plug on" if p.on else "plug off", e, plug_action(e, p.on)
                                 + (f"  (hard cut: {why})" if not p.on and why else "")))
    if p.on:
        steps += [PlannedStep("back", n, "wait for liveness, SSH, re-check") for n in p.nodes]
    steps += [PlannedStep("switch off", e, plug_action(e, False)) for e in p.switches_after]
    return steps


@dataclass(frozen=True)
class ClusterPower:
    """``power cluster on|off CLUSTER``."""

    cluster: str
    on: bool
    hard: bool = False
    """Off: cut every plug at once, no graceful shutdown."""

    @property
    def kind(self) -> str:
        return f"cluster-power-{'on' if self.on else 'off'}"

    @property
    def target(self) -> str:
        return self.cluster

    def needs(self, config: Config) -> Needs:
        """A power-off reads what still runs, on every node: the lanes it stops
        may have ranks outside the cluster."""
        known = self.cluster in config.clusters
        return Needs(nodes=tuple(config.nodes) if known and not self.on else ())

    def plan(self, state: OpsState) -> Plan:
        config = state.config
        p = guards.plan_cluster_power(config, self.cluster, self.on, state.holders(),
                                      state.power_error)
        entities = (*p.switches_before, *(config.nodes[n].switch for n in p.nodes),
                    *p.switches_after)
        off, verdicts, stops = (OffPlan({}), [], []) if self.on else off_plan(
            state, p.nodes, self.hard)
        report = guards.merged(p.report, verdicts)
        return Plan(self.kind, self.cluster, report,
                    tuple(plan_steps(config, p, off.modes, stops)),
                    self, nodes=p.nodes, entities=entities,
                    detail={"nodes": list(p.nodes),
                            "switches": [*p.switches_before, *p.switches_after],
                            "hard_cut": {n: why for n, why in off.modes.items() if why},
                            **({"stops": off.lanes()} if off.ranks else {})},
                    data=(p, off))

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        ctx, on, cluster = run.ctx, self.on, self.cluster
        p: guards.ClusterPowerPlan = plan.data[0]
        off: OffPlan = plan.data[1]
        modes: dict[str, str] = dict(off.modes)
        report = plan.report
        hold_way_out(run)
        run.lock(*off.lock_containers(p.nodes))
        power = _power(ctx)
        graceful = [n for n in p.nodes if not on and modes.get(n) == GRACEFUL]
        touched: list[str] = []
        # plugs and switches a call was sent to: told after an interruption

        async def switch(step: str, entity: str, state: bool) -> None:
            touched.append(entity)
            await run.step(step, entity, plug_action(entity, state),
                           partial(power.turn, entity, state),
                           describe=lambda s: f"{s.entity} confirmed {s.state}")

        found: dict[str, object] = {}
        stopped = await stop_lanes_first(run, off)
        try:
            # every plug read afresh before any node is shut down: one that does
            # not answer refuses the whole shutdown (no node is left dark with
            # a plug that cannot be switched)
            await together(*(plug_check(run, ctx.config.nodes[n].switch) for n in graceful))
            await together(*(poweroff(run, n, modes) for n in graceful))
            await together(*(wait_dark(run, n, modes) for n in graceful
                             if modes[n] == GRACEFUL))
            for entity in p.switches_before:
                await switch("switch on", entity, True)
            for node in p.nodes:
                await switch("plug on" if on else "plug off", ctx.config.nodes[node].switch, on)
            if on:
                results = await together(*(wait_back(run, n) for n in p.nodes))
                found = {n: r["summary"] for n, r in zip(p.nodes, results, strict=True)}
            for entity in p.switches_after:
                await switch("switch off", entity, False)
        except (asyncio.CancelledError, KeyboardInterrupt) as exc:
            again = (f"`sparktui power cluster {'on' if on else 'off'} {cluster}"
                     f"{' --hard' if self.hard else ''}`")

            def say(entity: str, reads: str) -> str:
                return f"{entity} reads {reads} (re-read now) -> to finish: {again}"

            for entity in touched:
                await tell_plug(run, entity, exc, partial(say, entity))
            if not touched:
                run.progress("plug state", cluster, f"no plug was switched -> to finish: {again}")
            raise
        skipped = [v.subject for v in report.warnings if v.guard == "protected-node"]
        kept = [v.subject for v in report.warnings if v.guard == "shared-switch"]
        hard = {n: why for n, why in modes.items() if why}
        shut = [n for n in graceful if not modes[n]]
        message = (f"{cluster} powered {'on' if on else 'off'}: {', '.join(p.nodes) or 'no node'}"
                   + stopped
                   + (f"; shut down first: {', '.join(shut)}" if shut else "")
                   + (f"; hard cut: {'; '.join(f'{n} ({w})' for n, w in hard.items())}"
                      if hard else "")
                   + (f"; skipped (protected): {', '.join(skipped)}" if skipped else "")
                   + (f"; kept on (shared): {', '.join(kept)}" if kept else ""))
        run.finish(True, message, {"nodes": list(p.nodes), "skipped": skipped,
                                   "kept_on": kept, "back": found, "hard_cut": hard,
                                   "stopped": off.lanes()})

