"""Thrash scenarios over real SSH against the simulator: the poller's
snapshots and each node's kernel journal through the detector. Boot D flags
all four nodes; the 22:45 long prompt flags dgx6 and dgx7 (and exactly the
nodes the simulated world sent under); a normal boot with its NVRM noise,
and the tight 22:45 lane idling before the prompt, flag nothing."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from sparktui.core.logsig import Kind
from sparktui.core.state import NodeSnapshot
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.watch.lane import LaneEvent, LinesArrived
from sparktui.watch.poller import Poller
from sparktui.watch.thrash import ThrashDetector

sys.path.insert(0, str(Path(__file__).parent))
from test_readiness_sim import World, fatal_of, lane_watch, serve, world


class Watchers:
    """Poller + detector + journal followers for a set of nodes, owned here."""

    def __init__(self, w: World, nodes: tuple[str, ...]) -> None:
        self.w = w
        self.changes: list[ThrashVerdict] = []
        self.detector = ThrashDetector(w.config.thrash, clock=w.sim.clock,
                                       on_change=self.changes.append)
        self.poller = Poller(w.config, w.fleet, w.endpoints, nodes=nodes, clock=w.sim.clock)
        self.nodes = nodes
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Watchers:
        queue = self.poller.subscribe()
        self.poller.start()
        self.tasks = [
            asyncio.create_task(self._judge(queue)),
            asyncio.create_task(self.detector.follow_journals(
                {n: self.w.fleet.get(n) for n in self.nodes})),
        ]
        return self

    async def _judge(self, queue: asyncio.Queue[NodeSnapshot]) -> None:
        """What service.cluster does with the poller's snapshots."""
        while True:
            self.detector.on_snapshot(await queue.get())

    async def __aexit__(self, *exc: object) -> None:
        await self.poller.stop()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def flagged(self, level: ThrashLevel = ThrashLevel.THRASH) -> set[str]:
        return {v.node for v in self.changes if v.level >= level}

    def max_level(self) -> dict[str, ThrashLevel]:
        out: dict[str, ThrashLevel] = {}
        for v in self.changes:
            out[v.node] = max(out.get(v.node, ThrashLevel.OK), v.level)
        return out


PACE = 300.0
"""Simulated seconds per real second at most while a node may hang: its held
SSH probe fails only after probe_timeout_s real seconds (see SimClock.step_until)."""


async def advance_until(w: World, pred: Callable[[], bool], *, step: float, max_sim_s: float,
                        pace: float | None = None,
                        why: Callable[[], str] = lambda: "") -> None:
    await w.sim.clock.step_until(pred, step=step, max_s=max_sim_s, pace=pace, why=why)


async def test_boot_d_thrash_is_flagged_on_all_four_nodes(tmp_path: Path) -> None:
    async with world(tmp_path, "boot-d-oom") as w:
        nodes = w.config.clusters["4nodes-switch"].nodes
        async with Watchers(w, nodes) as ws:
            await serve(w, "dsv41-flash-r37-4x-eager")
            # coarse through the uneventful part of the ~65-min eager load (two
            # minutes a step while no node's memory stalls a task, as the simulated
            # world knows; half a minute once it does), then at the poller's cadence
            # once the detector sees memory pressure
            def pressure() -> bool:
                return max(ws.max_level().values(), default=ThrashLevel.OK) \
                    >= ThrashLevel.PRESSURE

            start = w.sim.clock.monotonic()
            await advance_until(w, lambda: pressure() or any(
                w.sim.nodes[n].memory.targets()[0] > 0 for n in nodes), step=120.0,
                max_sim_s=3 * 3600, why=lambda: str(ws.max_level()))
            await advance_until(w, pressure, step=30.0,
                                max_sim_s=3 * 3600 - (w.sim.clock.monotonic() - start),
                                why=lambda: str(ws.max_level()))
            await advance_until(w, lambda: ws.flagged() == set(nodes), step=2.0,
                                max_sim_s=3600, pace=PACE, why=lambda: str(ws.max_level()))
            for n in nodes:
                v = ws.detector.verdict(n)
                assert v.level is ThrashLevel.THRASH
                assert any("ping answers, SSH probe failed" in e for e in v.evidence), v
                assert "SSH retry" in v.next_step or "plug-cycle" in v.next_step
            thrash_at = {v.node: v for v in ws.changes if v.level is ThrashLevel.THRASH}
            assert set(thrash_at) == set(nodes)


async def test_long_prompt_thrash_on_the_two_nodes_only(tmp_path: Path) -> None:
    async with world(tmp_path, "long-prompt") as w:
        nodes = w.config.clusters["4nodes-switch-b"].nodes
        async with Watchers(w, nodes) as ws:
            launch = await serve(w, "glm53-mxfp4-fp8-4x-r39-196k")
            node_of = {r.rank: r.node for r in launch.ranks}
            at_timeout: list[ThrashVerdict] = []

            def engine_line(event: LaneEvent) -> None:
                """Engine lines are evidence on the node their rank runs on."""
                if not isinstance(event, LinesArrived):
                    return
                for line in event.lines:
                    ev = ws.detector.on_line(node_of[event.rank], line.raw)
                    if ev is not None and ev.kind is Kind.RPC_TIMEOUT:
                        at_timeout.append(ws.detector.verdict(node_of[event.rank]))

            watch = await lane_watch(w, launch.lane, first_token=False)
            watch.subscribe(engine_line)
            lane = fatal_of(watch)
            try:
                # the ~56-min boot: no memory pressure anywhere, two minutes a step
                await advance_until(w, lambda: watch.ready, step=120.0, max_sim_s=4 * 3600,
                                    why=watch.tracker.summary)
                assert ws.flagged(ThrashLevel.SUSPECTED) == set(), ws.changes
                w.sim.run_prompt(launch.lane, 150_000)
                went_under: set[str] = set()

                def done() -> bool:
                    went_under.update(n for n in nodes if w.sim.nodes[n].thrash_onset is not None)
                    return lane.done() and ws.flagged() >= {"dgx6", "dgx7"}

                await advance_until(w, done, step=2.0, max_sim_s=3600, pace=PACE,
                                    why=lambda: f"{watch.tracker.summary()} {ws.max_level()}")
            finally:
                await watch.stop()
            assert lane.done() and lane.result() is not None
            # the detector agrees with the simulated world: every node that went
            # under is flagged, no other; dgx6 and dgx7 (the seed's two) among them
            assert {"dgx6", "dgx7"} <= went_under
            assert ws.flagged() == went_under
            # the engine's own lines reached the detector as evidence on rank 0's node
            assert at_timeout and at_timeout[0].node == node_of[0]
            assert any(e.startswith("engine: RPC call timed out") for e in at_timeout[0].evidence)


async def test_normal_boot_raises_no_alarm(tmp_path: Path) -> None:
    async with world(tmp_path, "normal") as w:
        nodes = w.config.clusters["8nodes-switch"].nodes
        async with Watchers(w, nodes) as ws:
            launch = await serve(w, "dsv41-flash-8x")
            watch = await lane_watch(w, launch.lane, first_token=False)
            lane = asyncio.create_task(watch.run())
            # a minute a step: no memory pressure in a normal boot (the noise is
            # journal lines, which a coarse step only delivers closer together)
            await advance_until(w, lane.done, step=60.0, max_sim_s=3 * 3600,
                                why=watch.tracker.summary)
            assert lane.result().failure is None
            assert ws.flagged(ThrashLevel.SUSPECTED) == set(), ws.changes
