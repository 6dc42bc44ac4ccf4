"""``stop LANE``: guards -> lock -> stop the containers of every rank (workers
first, the head last) -> verify the memory came back -> unlock.

"Memory freed" means each node's MemAvailable is back near its baseline:
MemTotal less the GB10 baseline reservation (``node_memory_gib -
admission_free_gib``, ~12.8 GiB), read from a fresh probe.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from sparktui.core.config import Config
from sparktui.core.state import KIB_PER_GIB
from sparktui.ops import guards
from sparktui.ops.context import OpsContext
from sparktui.ops.lanes import discover_lanes
from sparktui.ops.plan import Needs, OpsState, Plan, PlannedStep
from sparktui.ops.workflows.runner import StepFailed, WorkflowRun, together
from sparktui.watch.readiness import RankContainer

STOP_GRACE_S = 30
STOP_TIMEOUT_S = 90.0
MEMORY_WAIT_S = 120.0
MEMORY_POLL_S = 3.0


def stop_command(container: str) -> str:
    q = shlex.quote(container)
    return f"docker stop -t {STOP_GRACE_S} {q} && docker rm {q}"


def ordered(ranks: Sequence[RankContainer]) -> list[RankContainer]:
    """Workers first, the head (rank 0) last."""
    return sorted(ranks, key=lambda r: (r.rank == 0, r.rank))


def plan_stop(ranks: Sequence[RankContainer]) -> list[PlannedStep]:
    steps = [PlannedStep(f"stop rank {r.rank}", r.node, stop_command(r.container))
             for r in ordered(ranks)]
    nodes = sorted({r.node for r in ranks})
    steps += [PlannedStep("memory freed", n, "probe until MemAvailable is back near baseline")
              for n in nodes]
    return steps


def baseline_gib(ctx: OpsContext) -> float:
    g = ctx.config.guards
    return g.node_memory_gib - g.admission_free_gib


async def memory_freed(ctx: OpsContext, node: str) -> str:
    """Wait until the node's MemAvailable is within the baseline of MemTotal."""
    clock = ctx.clock
    deadline = clock.monotonic() + MEMORY_WAIT_S
    base = baseline_gib(ctx)
    last = "no probe"
    attempts = 0
    while True:
        attempts += 1
        snap = (await ctx.snapshot([node])).get(node)
        mem = snap.probe.meminfo if snap and snap.probe else None
        if mem is not None:
            want = mem.total_kib / KIB_PER_GIB - base
            last = (f"MemAvailable {mem.available_gib:.1f} GiB of {mem.total_gib:.1f} "
                    f"(want >= {want:.1f})")
            if mem.available_gib >= want:
                return last
        if clock.monotonic() >= deadline and attempts >= 3:
            raise TimeoutError(f"{node}: memory not freed after {MEMORY_WAIT_S:g} s: {last} -> "
                               f"something still holds memory (a leftover process?)")
        await clock.sleep(MEMORY_POLL_S)


@dataclass(frozen=True)
class Stop:
    """``stop LANE``: its ranks are found in one probe of every node."""

    lane: str
    kind: str = field(default="stop", init=False)

    @property
    def target(self) -> str:
        return self.lane

    def needs(self, config: Config) -> Needs:
        return Needs(nodes=tuple(config.nodes))

    def plan(self, state: OpsState) -> Plan:
        ranks = discover_lanes(state.snapshot).get(self.lane, ())
        nodes = sorted({r.node for r in ranks})
        report = guards.evaluate_stop(state.config, self.lane, nodes, state.holders())
        if not ranks:
            report = guards.GuardReport((*report.verdicts, guards.Verdict(
                "lane", self.lane, False, f"no container labelled sparktui.lane={self.lane} "
                                          f"on any node that answered -> nothing to stop")))
        return Plan("stop", self.lane, report, tuple(plan_stop(ranks)), self,
                    nodes=tuple(nodes),
                    detail={"nodes": nodes, "containers": [r.container for r in ranks]},
                    data=tuple(ranks))

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        ctx = run.ctx
        ranks: tuple[RankContainer, ...] = plan.data
        nodes = list(plan.nodes)
        run.lock(nodes, {n: [r.container for r in ranks if r.node == n] for n in nodes})
        if ctx.lane_watchers is not None:  # its exits from now on are ours, not a failure
            ctx.lane_watchers.stopping(self.lane)
        workers = [r for r in ordered(ranks) if r.rank != 0]
        heads = [r for r in ranks if r.rank == 0]

        failed: list[StepFailed] = []

        async def stop(r: RankContainer) -> None:
            cmd = stop_command(r.container)

            async def go() -> str:
                res = await ctx.link(r.node).run(cmd, STOP_TIMEOUT_S)
                if res.exit_status != 0:
                    raise RuntimeError(f"exit {res.exit_status}: "
                                       f"{(res.stderr or res.stdout).strip()[:300]}")
                return "stopped and removed"

            try:
                await run.step(f"stop rank {r.rank}", r.node, cmd, go, describe=lambda m: m)
            except StepFailed as exc:  # the others are still stopped
                failed.append(exc)

        await together(*(stop(r) for r in workers))
        for r in heads:
            await stop(r)
        lost = {f.target for f in failed}
        freed = {}
        for node in nodes:
            if node not in lost:
                freed[node] = await run.step("memory freed", node,
                                             "probe until MemAvailable is back near baseline",
                                             partial(memory_freed, ctx, node),
                                             describe=lambda m: m)
        if failed:
            run.finish(False, "; ".join(str(f) for f in failed)
                       + f" (stopped on {', '.join(sorted(freed)) or 'no node'})",
                       {"nodes": nodes, "memory": freed, "failed": sorted(lost)})
        else:
            run.finish(True, f"{self.lane} stopped on {', '.join(nodes)}",
                       {"nodes": nodes, "memory": freed})
