"""``stop LANE``: guards -> lock -> stop the containers of every rank (workers
first, the head last) -> verify the memory came back -> unlock.

"Memory freed" means each node's MemAvailable is back near its baseline:
MemTotal less the GB10 baseline reservation (``node_memory_gib -
admission_free_gib``, ~12.8 GiB), read from a fresh probe.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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


def plan_stop(ranks: Sequence[RankContainer],
              memory_on: Sequence[str] | None = None) -> list[PlannedStep]:
    """Stop every rank (workers first), then check the memory came back on
    ``memory_on`` (default: every node of the ranks)."""
    steps = [PlannedStep(f"stop rank {r.rank}", r.node, stop_command(r.container))
             for r in ordered(ranks)]
    nodes = sorted({r.node for r in ranks}) if memory_on is None else memory_on
    steps += [PlannedStep("memory freed", n, "probe until MemAvailable is back near baseline")
              for n in nodes]
    return steps


def lanes_on(state: OpsState, nodes: Sequence[str]
             ) -> tuple[list[guards.Verdict], dict[str, tuple[RankContainer, ...]]]:
    """What a power-off of ``nodes`` does to what runs there (issue 15): every lane
    with a running rank on them is stopped whole (each rank, on every node) first,
    under the guards of ``stop LANE`` (a protected lane refuses, as it refuses a
    stop); containers that are no sparktui lane's are named in a warning (the
    shutdown stops them, a hard cut kills them). Returns the verdicts and the
    lanes to stop with their ranks."""
    config, mine = state.config, set(nodes)
    verdicts: list[guards.Verdict] = []
    lanes: dict[str, tuple[RankContainer, ...]] = {}
    for lane, lane_ranks in sorted(discover_lanes(state.snapshot).items()):
        if not any(r.node in mine and r.running for r in lane_ranks):
            continue
        where = sorted({r.node for r in lane_ranks})
        on = ", ".join(n for n in nodes if n in where)
        verdicts += [replace(v, message=v.message.replace(
                         " -> ", f" -> leave {on} on (a power-off stops the lane), or ", 1))
                     if v.guard == "protected-lane" and v.refused else v
                     for v in guards.evaluate_stop(config, lane, where, state.holders()).verdicts]
        lanes[lane] = lane_ranks
    for node in nodes:
        snap = state.snapshot.get(node)
        if snap is None or snap.probe is None:
            continue
        others = [c.name for c in snap.probe.running_containers if not c.lane]
        if others:
            verdicts.append(guards.Verdict(
                "node-busy", node, True, f"{node} runs {', '.join(others)} (no sparktui lane): "
                                         f"the power-off ends it", warning=True))
    return verdicts, lanes


async def stop_ranks(run: WorkflowRun, lanes: Mapping[str, Sequence[RankContainer]],
                     memory_on: Sequence[str]) -> tuple[dict[str, str], list[StepFailed]]:
    """Stop the ranks of ``lanes`` (workers together, then the heads), then wait
    for the memory on the nodes of ``memory_on`` whose stops all succeeded.
    Returns node -> memory found, and the stops that failed (the others still ran)."""
    ctx = run.ctx
    failed: list[StepFailed] = []
    ranks = [r for lane_ranks in lanes.values() for r in lane_ranks]
    if ctx.lane_watchers is not None:  # their exits from now on are ours, not a failure
        for lane in lanes:
            ctx.lane_watchers.stopping(lane)

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

    await together(*(stop(r) for r in ordered(ranks) if r.rank != 0))
    for r in ranks:
        if r.rank == 0:
            await stop(r)
    lost = {f.target for f in failed}
    freed = {}
    for node in memory_on:
        if node not in lost:
            freed[node] = await run.step("memory freed", node,
                                         "probe until MemAvailable is back near baseline",
                                         partial(memory_freed, ctx, node),
                                         describe=lambda m: m)
    return freed, failed


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
        ranks: tuple[RankContainer, ...] = plan.data
        nodes = list(plan.nodes)
        run.lock(nodes, {n: [r.container for r in ranks if r.node == n] for n in nodes})
        freed, failed = await stop_ranks(run, {self.lane: ranks}, nodes)
        if failed:
            lost = {f.target for f in failed}
            run.finish(False, "; ".join(str(f) for f in failed)
                       + f" (stopped on {', '.join(sorted(freed)) or 'no node'})",
                       {"nodes": nodes, "memory": freed, "failed": sorted(lost)})
        else:
            run.finish(True, f"{self.lane} stopped on {', '.join(nodes)}",
                       {"nodes": nodes, "memory": freed})
