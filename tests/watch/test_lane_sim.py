"""The lane watcher against the simulator (real SSH and HTTP on loopback,
manual clock): another lane on the port is never taken for this boot; a
serving log whose endpoint stays silent stalls at the window; a stream cut
while the engine dies still yields the EngineDead alert (20 runs); the
earliest failing rank is named although its stream starts late."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_readiness_sim import World, drive, lane_watch, serve, world

from sparktui.core.logsig import Kind, Phase, parse_timestamp
from sparktui.core.recipe_load import load_recipe
from sparktui.ops.context import open_runtime
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.serve import Serve, ServeOptions
from sparktui.ops.workflows.stop import Stop
from sparktui.service.events import AlertRaised, ServiceEvent
from sparktui.service.lane_feed import LaneFeed
from sparktui.sim.docker import LogLine as SimLogLine
from sparktui.watch.lane import LaneWatcher, LaneWatchers
from sparktui.watch.readiness import Outcome, discover_lane


def _vllm_ts(t: float) -> str:
    """vLLM's header stamp (``%m-%d %H:%M:%S``, vllm/logger.py:33)."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%m-%d %H:%M:%S")

SERVING = "glm53-flash-eugr-2x"      # 2nodes-dac: dgx1 (head), dgx2; port 8000
SAME_HEAD = "dsv41-flash-eugr-0913-4x"  # 4nodes-switch: dgx1 (head) .. dgx4; port 8000
UNPROTECTED = "glm53-mxfp4-fp8-4x-r39-196k"  # 4nodes-switch-b: dgx5 (head) .. dgx8


async def until_ready(w: World, watch: LaneWatcher, max_sim_s: float = 4 * 3600) -> None:
    task = asyncio.create_task(watch.verdict())
    # half-minute steps: only the outcome is asserted
    await drive(w.sim, task, step=30.0, max_sim_s=max_sim_s, why=watch.tracker.summary)
    assert task.result().outcome is Outcome.READY, task.result().summary


async def test_another_lane_on_the_port_is_never_taken_for_this_boot(tmp_path: Path) -> None:
    async with world(tmp_path, "normal") as w:
        first = await serve(w, SERVING)
        a = await lane_watch(w, first.lane, first_token=False)
        a.start()
        try:
            await until_ready(w, a)
            second = await serve(w, SAME_HEAD)
            b = await lane_watch(w, second.lane, first_token=False)
            task = asyncio.create_task(b.run())
            await drive(w.sim, task, step=1.0, max_sim_s=3600, why=b.tracker.summary)
        finally:
            await a.stop()
        result = task.result()
        assert result.outcome is Outcome.FAILED, result.summary
        assert not result.stages and Phase.SERVING not in result.phase_times
        assert result.port_taken == f"port 8000 on dgx1 answered by lane {SERVING}"


async def test_startup_complete_but_a_silent_port_stalls_at_the_window(tmp_path: Path) -> None:
    async with world(tmp_path, "normal") as w:
        w.sim.schedule_http_start = lambda engine: None  # type: ignore[method-assign]
        launch = await serve(w, SERVING)
        watch = await lane_watch(w, launch.lane, first_token=False, stall_after_s=600)
        task = asyncio.create_task(watch.run())
        # half-minute steps through the load, 10 s steps from the KV allocation on
        # (a minute or more before the serving line the window is timed from, which
        # then arrives as late as before; a verdict meanwhile ends both waits)
        await w.sim.clock.step_until(
            lambda: task.done() or Phase.KV_ALLOC in watch.tracker.phase_times, step=30.0,
            max_s=4 * 3600, why=watch.tracker.summary)
        await drive(w.sim, task, step=10.0, max_sim_s=4 * 3600, why=watch.tracker.summary)
        result = task.result()
        assert result.outcome is Outcome.STALLED, result.summary
        times = result.phase_times
        assert 600 <= times[Phase.STALLED] - times[Phase.SERVING] <= 600 + 30
        assert result.ranks == {0: "running", 1: "running"}


async def test_engine_dead_reaches_the_console_although_the_stream_was_cut(
        tmp_path: Path) -> None:
    """The console's missed EngineDead, 20 times: the engine writes its last
    lines and its container exits while rank 0's log stream is being cut (a
    stalled probe closes the connection). Every run raises the fatal alert."""
    async with world(tmp_path, "normal") as w:
        for run in range(20):
            launch = await serve(w, SERVING)
            watch = await lane_watch(w, launch.lane, first_token=False, resource_poll_s=None)
            events: list[ServiceEvent] = []
            feed = LaneFeed(watch, lambda: "2nodes-dac", events.append)
            watch.start()
            try:
                await w.sim.advance(8.0)
                head = w.sim.lane_rank0(launch.lane)
                while watch.delivered.get(0, 0) < len(head.container.logs):
                    await asyncio.sleep(0.005)  # the stream is established and caught up
                head.style.rpc_timeout(head)
                head.oom_killed()
                await w.fleet.get("dgx1").close()  # the cut: a clean EOF, no error
                task = asyncio.create_task(watch.verdict())
                await drive(w.sim, task, step=0.5, max_sim_s=120, why=watch.tracker.summary)
            finally:
                feed.unsubscribe()
                await watch.stop()
            alerts = [e.alert for e in events if isinstance(e, AlertRaised)]
            assert len(alerts) == 1, (run, alerts)
            assert alerts[0].evidence[0].startswith("rank 0 "), alerts[0]
            assert "fatal error" in alerts[0].evidence[0] or "EngineDead" in alerts[0].evidence[0]
            assert any("sample_tokens" in e for e in alerts[0].evidence), alerts[0]
            for r in launch.ranks:
                await w.fleet.get(r.node).run(f"docker rm -f {r.container}", 30)


class LateStream:
    """A node link whose log streams start late (a slow channel open)."""

    def __init__(self, link: object, delay_s: float) -> None:
        self.link = link
        self.delay_s = delay_s

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        await asyncio.sleep(self.delay_s)
        async for chunk in self.link.stream(cmd):  # type: ignore[attr-defined]
            yield chunk

    async def run(self, cmd: str, timeout: float) -> object:
        return await self.link.run(cmd, timeout)  # type: ignore[attr-defined]


async def test_cache_not_symlink_names_the_earliest_rank_with_staggered_streams(
        tmp_path: Path) -> None:
    for run in range(3):
        async with world(tmp_path / str(run), "cache-not-symlink") as w:
            launch = await serve(w, "dsv41-flash-8x")
            links = {n: w.fleet.get(n) for n in w.config.nodes}
            ranks = await discover_lane(links, launch.lane)  # type: ignore[arg-type]
            # the failing ranks' streams start late, rank 0's at once
            late = {n: LateStream(links[n], 0.3 + 0.1 * run) for n in ("dgx6", "dgx7", "dgx8")}
            watch = LaneWatcher(launch.lane, ranks, {**links, **late},  # type: ignore[arg-type]
                                w.endpoints.node("dgx1").api_host, stall_after_s=900,
                                clock=w.sim.clock, first_token=False)
            task = asyncio.create_task(watch.run())
            await drive(w.sim, task, step=1.0, max_sim_s=600, why=watch.tracker.summary)
            f = task.result().failure
            assert f is not None and f.kind is Kind.HF_ENTRY_MISSING, f
            first: dict[int, float] = {}
            for r in launch.ranks:
                c = w.sim.nodes[r.node].docker.containers[r.container]
                for ln in c.logs:
                    if "LocalEntryNotFoundError" in ln.text:
                        first[r.rank] = ln.t
                        break
            # the simulated ranks may write it at the same instant: any of those is first
            assert first[f.rank] == min(first.values()), (f, first)
            assert parse_timestamp(f.timestamp) is not None


async def test_a_lane_stopped_by_us_ends_stopped_not_fatal(tmp_path: Path) -> None:
    """The console's lane is stopped with the stop workflow mid-boot: the
    workers' exits (and the head's NCCL errors they cause) are the stop's
    doing; no fatal alert, the lane shows "stopped", the verdict is stopped."""
    async with world(tmp_path, "normal") as w:
        launch = await serve(w, UNPROTECTED)
        links = {n: w.fleet.get(n) for n in w.config.nodes}
        ranks = await discover_lane(links, launch.lane)  # type: ignore[arg-type]
        watchers = LaneWatchers()
        events: list[ServiceEvent] = []
        watch = watchers.attach(launch.lane, lambda: LaneWatcher(
            launch.lane, ranks, links, w.endpoints.node(ranks[0].node).api_host,  # type: ignore[arg-type]
            stall_after_s=900, clock=w.sim.clock, first_token=False, resource_poll_s=None))
        feed = LaneFeed(watch, lambda: "4nodes-switch-b", events.append)
        try:
            while watch.tracker.phase is not Phase.LOADING:
                await w.sim.advance(5.0)
                await asyncio.sleep(0.005)
            async with open_runtime(w.config, clock=w.sim.clock, endpoints=w.endpoints,
                                    links=w.fleet, lane_watchers=watchers) as rt:
                task = asyncio.create_task(execute(rt.ops, await prepare(rt.ops,
                                                                         Stop(launch.lane))))
                await drive(w.sim, task, step=1.0, max_sim_s=600)
                assert task.result().ok, task.result().message
            verdict = asyncio.create_task(watch.verdict())
            await drive(w.sim, verdict, step=1.0, max_sim_s=120, why=watch.tracker.summary)
        finally:
            feed.unsubscribe()
            await watchers.close()
        assert verdict.result().outcome is Outcome.STOPPED, verdict.result().summary
        assert not [e for e in events if isinstance(e, AlertRaised)]
        assert feed.view().phase == "stopped" and not feed.view().failure


class SlowCatchUp:
    """A node link whose one-shot reads answer late (the live stream is not)."""

    def __init__(self, link: object, delay_s: float) -> None:
        self.link = link
        self.delay_s = delay_s

    def stream(self, cmd: str) -> AsyncIterator[bytes]:
        return self.link.stream(cmd)  # type: ignore[attr-defined,no-any-return]

    async def run(self, cmd: str, timeout: float) -> object:
        if cmd.startswith("docker logs"):
            await asyncio.sleep(self.delay_s)
        return await self.link.run(cmd, timeout)  # type: ignore[attr-defined]


async def test_the_engines_own_stamps_name_the_first_rank_when_docker_disagrees(
        tmp_path: Path) -> None:
    """Rank 1's engine wrote its fatal line first (engine stamps 1 s apart),
    but docker stamped it later than rank 0's (a buffered stderr) and its
    stream delivers it after rank 0's: the lane failed on rank 1."""
    for run in range(3):
        async with world(tmp_path / str(run), "normal") as w:
            launch = await serve(w, UNPROTECTED)
            links = {n: w.fleet.get(n) for n in w.config.nodes}
            ranks = await discover_lane(links, launch.lane)  # type: ignore[arg-type]
            node1 = next(r.node for r in ranks if r.rank == 1)
            slow = {node1: SlowCatchUp(links[node1], 0.2 + 0.1 * run)}
            watch = LaneWatcher(launch.lane, ranks, {**links, **slow},  # type: ignore[arg-type]
                                w.endpoints.node(ranks[0].node).api_host, stall_after_s=900,
                                clock=w.sim.clock, first_token=False, resource_poll_s=None)
            task = asyncio.create_task(watch.run())
            while watch.tracker.phase is not Phase.LOADING:
                await w.sim.advance(5.0)
                await asyncio.sleep(0.005)
            now = w.sim.clock.time()
            c0, c1 = (w.sim.nodes[r.node].docker.containers[r.container]
                      for r in sorted(ranks, key=lambda r: r.rank)[:2])
            c0.logs.append(SimLogLine(now - 0.8, "stderr",
                                      f"(EngineCore_DP0 pid=294) ERROR {_vllm_ts(now - 1)} "
                                      "[multiproc_executor.py:512] Worker proc VllmWorker-1 "
                                      "died unexpectedly (exit code: -9), shutting down "
                                      "executor."))
            while watch.tracker.failure is None:
                await asyncio.sleep(0.002)
            c1.logs.append(SimLogLine(now - 0.5, "stderr",
                                      f"(Worker_TP1 pid=294) ERROR {_vllm_ts(now - 2)} "
                                      "[multiproc_executor.py:671] RuntimeError: NCCL error: "
                                      "unhandled system error"))
            await drive(w.sim, task, step=0.5, max_sim_s=120, why=watch.tracker.summary)
            f = task.result().failure
            assert f is not None and f.rank == 1, f
            assert "NCCL error" in f.line and f.engine_time == int(now - 2)


async def test_a_stalled_serve_that_stops_its_ranks_raises_no_fatal_alert(
        tmp_path: Path) -> None:
    """The serve workflow stalls (the port stays silent) and stops its ranks:
    the console's shared watcher hears of it first, so the exits that follow
    are no fatal alert; the lane ends "stopped"."""
    recipe_name = SERVING  # its own pair is production: served on 4nodes-switch-b
    async with world(tmp_path, "normal") as w:
        w.sim.schedule_http_start = lambda engine: None  # type: ignore[method-assign]
        events: list[ServiceEvent] = []
        feeds: list[LaneFeed] = []
        watchers = LaneWatchers(on_new=lambda watch: feeds.append(
            LaneFeed(watch, lambda: "4nodes-switch-b", events.append)))
        recipe = load_recipe(w.config, recipe_name)
        try:
            async with open_runtime(w.config, clock=w.sim.clock, endpoints=w.endpoints,
                                    links=w.fleet, lane_watchers=watchers) as rt:
                serve_wf = Serve(recipe, "4nodes-switch-b", ServeOptions(
                    stall_after_s=120, first_token=False, qualify=False))
                task = asyncio.create_task(execute(rt.ops, await prepare(rt.ops, serve_wf)))
                await drive(w.sim, task, step=300.0, max_sim_s=6 * 3600)
                result = task.result()
            watch = watchers.get(recipe_name)
            assert watch is not None
            for _ in range(120):  # the exits reach the watcher
                if watch.stopped or any(isinstance(e, AlertRaised) for e in events):
                    break
                await w.sim.advance(1.0)
                await asyncio.sleep(0.01)
        finally:
            for f in feeds:
                f.unsubscribe()
            await watchers.close()
        assert not result.ok and result.detail["outcome"] == "stalled", result.message
        assert "(ranks stopped)" in result.message
        assert not [e for e in events if isinstance(e, AlertRaised)], events
        assert feeds[-1].view().phase == "stopped"
