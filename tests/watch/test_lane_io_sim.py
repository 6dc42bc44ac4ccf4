"""A silent cold load against the simulator (scenario silent-cold-load: each
rank scans a 101.5 GB sparse shard for ~61 min, no log line, MemAvailable
flat): the ranks' engines' read bytes (their /proc/<pid>/io, read through
the node's shell) keep the lane alive past ``stall_after``; when the reads
stop too (the NAS hangs), the lane stalls at ``stall_after`` and the report
says the ranks still run and what ``--keep`` / ``stop`` do."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_readiness_sim import World, drive, lane_watch, serve, world

from sparktui.core.logsig import Phase
from sparktui.core.recipe_load import load_recipe
from sparktui.ops.context import open_runtime
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.serve import Serve, ServeOptions
from sparktui.watch.readiness import Outcome

SCENARIO = "silent-cold-load"
RECIPE = "glm53-flash-eugr-2x"  # its own pair is production: served on 4nodes-switch-b (4 ranks)
CLUSTER = "4nodes-switch-b"
STALL_S = 300.0


async def scanning(w: World, lane: str) -> None:
    """Until the lane's ranks read their sparse shard."""

    def loading() -> bool:
        try:
            return w.sim.lane_rank0(lane).phase == "loading"
        except KeyError:
            return False

    await w.sim.clock.step_until(loading, step=5.0, max_s=3600 - w.sim.clock.monotonic(),
                                 why=lambda: "the lane never began loading")


async def test_a_silent_scan_whose_reads_advance_is_no_stall(tmp_path: Path) -> None:
    async with world(tmp_path, SCENARIO) as w:
        launch = await serve(w, "glm53-mxfp4-fp8-4x-r39-196k")
        # the console's watch: memory from the poller (none here), I/O every 60 s
        watch = await lane_watch(w, launch.lane, stall_after_s=STALL_S, resource_poll_s=None)
        task = asyncio.create_task(watch.run())
        try:
            await scanning(w, launch.lane)
            await w.sim.clock.step_until(lambda: watch.tracker.phase is Phase.LOADING,
                                         step=5.0, max_s=600, why=watch.tracker.summary)
            lines = sum(watch.delivered.values())
            start = w.sim.clock.monotonic()
            # whole drained 30 s steps: the I/O is read every 60 s, the window is 300 s
            while w.sim.clock.monotonic() - start < 4 * STALL_S:
                await w.sim.clock.advance(30.0, step=30.0, drain=True, whole_steps=True)
                assert not task.done(), task.result().summary
            assert sum(watch.delivered.values()) == lines, "the scan printed something"
            assert watch.tracker.phase is Phase.LOADING
            assert "read by its engine" in watch.tracker.last_progress, \
                watch.tracker.last_progress
            assert all(e.phase == "loading" for e in w.sim.engines())
        finally:
            await watch.stop()


async def test_a_silent_scan_whose_reads_stop_stalls_at_the_window(tmp_path: Path) -> None:
    async with world(tmp_path, SCENARIO) as w:
        recipe = load_recipe(w.config, RECIPE)
        async with open_runtime(w.config, clock=w.sim.clock, endpoints=w.endpoints,
                                links=w.fleet) as rt:
            wf = Serve(recipe, CLUSTER, ServeOptions(stall_after_s=STALL_S, first_token=False,
                                                     qualify=False, keep=True))
            task = asyncio.create_task(execute(rt.ops, await prepare(rt.ops, wf)))
            await scanning(w, RECIPE)
            # past the window (whole drained 30 s steps): the bytes read are progress
            for _ in range(3 * int(STALL_S) // 30):
                await w.sim.clock.advance(30.0, step=30.0, drain=True, whole_steps=True)
                assert not task.done(), task.result().message
            w.sim.spec.nas_aggregate_mbps = 0.0  # the NAS hangs: no byte read from now on
            hung = w.sim.clock.monotonic()

            def since_hung(s: float) -> Callable[[], bool]:
                return lambda: task.done() or w.sim.clock.monotonic() - hung >= s

            # 5 s steps while the read under way may still end (its bytes are the
            # last progress), 30 s steps from then until a minute before the window
            # ends (nothing can progress there; a stall declared meanwhile ends the
            # waits and fails the bound below), 5 s steps again around its end
            await w.sim.clock.step_until(since_hung(60 + 10 + 20), step=5.0, max_s=STALL_S)
            await w.sim.clock.step_until(since_hung(STALL_S - 60), step=30.0, max_s=STALL_S)
            await drive(w.sim, task, step=5.0,
                        max_sim_s=3 * STALL_S - (w.sim.clock.monotonic() - hung))
            took = w.sim.clock.monotonic() - hung
        result = task.result()
        assert not result.ok and result.detail["outcome"] == Outcome.STALLED.value, \
            result.message
        # the read under way ends within a scan step (60 s); I/O is read every 10 s
        assert STALL_S <= took <= STALL_S + 60 + 10 + 30, took
        assert "read by its engine" in result.message  # the last progress seen
        assert "ranks still running: r0, r1, r2, r3 (" in result.message, result.message
        assert f"ranks kept: --keep; `sparktui stop {RECIPE}` stops them" in result.message
        assert all(e.container.status == "running" for e in w.sim.engines())
