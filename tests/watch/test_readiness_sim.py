"""Readiness scenarios over real SSH and HTTP against the simulator (manual
clock): a normal cold boot reaches serving with a sensible ETA; ranks 5-7
die on a cache dir that is not the NAS symlink; a slow 8-way NFS load of two
hours is never declared failed or stalled; the 22:45 long prompt kills the
ready lane with EngineDead."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from sparktui.adapters.endpoints import Endpoints, resolve_endpoints, sim_endpoints_path
from sparktui.adapters.ssh import Fleet
from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.core.failure import Failure
from sparktui.core.logsig import Kind, Phase
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import LaunchPlan, plan
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import running_sim
from sparktui.watch.lane import FatalDecided, LaneEvent, LaneWatcher
from sparktui.watch.readiness import Outcome, discover_lane

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class World:
    sim: Sim
    config: Config
    endpoints: Endpoints
    fleet: Fleet


@asynccontextmanager
async def world(tmp_path: Path, scenario: str) -> AsyncIterator[World]:
    """The shipped fleet on a simulator (manual clock), reached as production does."""
    config = load_config(ROOT / "config.toml")
    config = dataclasses.replace(
        config, console=dataclasses.replace(config.console, state_dir=str(tmp_path / "state")))
    async with running_sim(config, scenario=scenario, workdir=tmp_path / "sim") as sim:
        path = sim_endpoints_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sim.endpoints()))
        endpoints = resolve_endpoints(config)
        async with Fleet.from_config(config, endpoints, clock=sim.clock) as fleet:
            yield World(sim, config, endpoints, fleet)


async def serve(w: World, recipe: str, ranks: Iterable[int] | None = None) -> LaunchPlan:
    """docker run every rank (or only ``ranks``), as the serve workflow will (GID index 3)."""
    r = load_recipe(w.config, recipe)
    launch = plan(w.config, r, r.cluster)
    wanted = set(ranks) if ranks is not None else {rk.rank for rk in launch.ranks}
    for r in launch.ranks:
        if r.rank not in wanted:
            continue
        result = await w.fleet.get(r.node).run(r.command(3), 30)
        assert result.ok, result.stderr
    return launch


async def lane_watch(w: World, lane: str, **kw: object) -> LaneWatcher:
    links = {n: w.fleet.get(n) for n in w.config.nodes}
    ranks = await discover_lane(links, lane)  # type: ignore[arg-type]
    assert ranks, lane
    api_host = w.endpoints.node(ranks[0].node).api_host
    kw.setdefault("stall_after_s", w.config.console.stall_after_s)
    return LaneWatcher(lane, ranks, links, api_host, clock=w.sim.clock, **kw)  # type: ignore[arg-type]


def fatal_of(watch: LaneWatcher) -> asyncio.Future[Failure]:
    """Start ``watch`` to follow its lane past ready (as the console does);
    the future holds the lane's decided failure."""
    fut: asyncio.Future[Failure] = asyncio.get_running_loop().create_future()

    def on_event(event: LaneEvent) -> None:
        if isinstance(event, FatalDecided) and not fut.done():
            fut.set_result(event.failure)

    watch.subscribe(on_event)
    watch.start()
    return fut


async def drive(sim: Sim, task: asyncio.Task, *, step: float, max_sim_s: float,
                each: Callable[[], None] | None = None,
                why: Callable[[], str] = lambda: "") -> None:
    """Advance simulated time until ``task`` ends, in whole steps that each
    let the in-process I/O they start finish (`SimClock.step_until`);
    ``each`` after every step."""

    def ended() -> bool:
        if each is not None:
            each()
        return task.done()

    await sim.clock.step_until(ended, step=step, max_s=max_sim_s,
                               why=lambda: f"task did not end in time: {why()}")


async def test_normal_cold_boot_reaches_serving_with_a_sensible_eta(tmp_path: Path) -> None:
    async with world(tmp_path, "normal") as w:
        launch = await serve(w, "dsv41-flash-8x")
        watch = await lane_watch(w, launch.lane)
        task = asyncio.create_task(watch.run())
        etas: list[tuple[float, float, float]] = []

        def sample() -> None:
            lp = watch.tracker.load_progress()
            if lp is not None and lp.eta_s is not None and 0.4 < lp.fraction < 0.6:
                etas.append((w.sim.clock.monotonic(), lp.eta_s, lp.fraction))

        # 30 s steps: the ETA is the log's own (rate by the lines' stamps), so a
        # sample is as exact at any step's end; ~10 samples fall mid-load
        await drive(w.sim, task, step=30.0, max_sim_s=3 * 3600, each=sample,
                    why=watch.tracker.summary)
        result = task.result()
        assert result.outcome is Outcome.READY, result.summary
        assert list(result.stages) == ["port", "health", "models", "first token"]
        times = result.phase_times
        assert times[Phase.LOADING] < times[Phase.KV_ALLOC] < times[Phase.GRAPH_CAPTURE] \
            <= times[Phase.SERVING]
        assert etas, "no ETA seen mid-load"
        t, eta, _ = etas[len(etas) // 2]
        actual = times[Phase.KV_ALLOC] - t  # load end as seen by the tracker
        assert abs(eta - actual) <= 0.2 * actual + 30, (eta, actual)
        assert watch.tracker.kv.tokens and watch.tracker.kv.concurrency


async def test_cache_dir_not_symlink_fails_on_rank_5_to_7(tmp_path: Path) -> None:
    async with world(tmp_path, "cache-not-symlink") as w:
        launch = await serve(w, "dsv41-flash-8x")
        watch = await lane_watch(w, launch.lane)
        task = asyncio.create_task(watch.run())
        await drive(w.sim, task, step=1.0, max_sim_s=600, why=watch.tracker.summary)
        result = task.result()
        assert result.outcome is Outcome.FAILED
        f = result.failure
        assert f is not None and f.rank in (5, 6, 7), f
        assert f.kind is Kind.HF_ENTRY_MISSING
        assert "LocalEntryNotFoundError" in f.line
        assert result.phase_times[Phase.FAILED] < 60


async def test_slow_8way_nfs_load_is_never_declared_failed(tmp_path: Path) -> None:
    """The seed's 122-minute load: the 1800 s wait that killed it cannot happen."""
    async with world(tmp_path, "slow-8way-nfs") as w:
        launch = await serve(w, "dsv41-flash-8x")
        watch = await lane_watch(w, launch.lane, first_token=False, poll_s=5.0)
        task = asyncio.create_task(watch.run())
        # two minutes a step: 7 looks per 900 s stall window, each seeing the load's
        # progress (shard lines, GBs read); coarser looks only make a false stall likelier
        await drive(w.sim, task, step=120.0, max_sim_s=5 * 3600, why=watch.tracker.summary)
        result = task.result()
        assert result.outcome is Outcome.READY, result.summary
        assert result.stages["health"] > 1800 * 2
        assert Phase.STALLED not in result.phase_times
        assert result.failure is None


async def test_long_prompt_kills_the_ready_lane_with_engine_dead(tmp_path: Path) -> None:
    async with world(tmp_path, "long-prompt") as w:
        launch = await serve(w, "glm53-mxfp4-fp8-4x-r39-196k")
        watch = await lane_watch(w, launch.lane, first_token=False)
        fatal = fatal_of(watch)
        try:
            # the ~56-min boot in whole drained minutes (nothing here looks at it)
            await w.sim.clock.step_until(lambda: watch.ready or fatal.done(), step=60.0,
                                         max_s=4 * 3600, why=watch.tracker.summary)
            assert not fatal.done(), fatal.result()
            req = w.sim.run_prompt(launch.lane, 150_000)
            await drive(w.sim, fatal, step=5.0, max_sim_s=3600,  # type: ignore[arg-type]
                        why=lambda: f"{watch.tracker.summary()}; request {req}")
        finally:
            await watch.stop()
        f = fatal.result()
        assert f.rank == 0
        assert f.kind in (Kind.RPC_TIMEOUT, Kind.ENGINE_DEAD), f
        assert "sample_tokens" in f.line or "sample_tokens" in (f.cause or "") or any(
            "sample_tokens" in a for a in f.after)
