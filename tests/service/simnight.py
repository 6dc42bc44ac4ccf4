"""A night on the simulator for service-level tests: the shipped config cut
to one cluster (half the SSH traffic per simulated step), a manual clock,
the console's `ClusterService` reached as production reaches it, every
event kept with the simulated time it arrived at."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sparktui.adapters.endpoints import resolve_endpoints, sim_endpoints_path
from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertRaised, ServiceEvent
from sparktui.service.sentinel import Sentinel
from sparktui.sim.clock import loop_idle
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import connect, running_sim
from sparktui.watch.canary import Completer, completer_for

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Night:
    sim: Sim
    config: Config
    service: ClusterService
    canary: Completer
    events: list[tuple[float, ServiceEvent]] = field(default_factory=list)

    def record(self, event: ServiceEvent) -> None:
        self.events.append((self.sim.clock.monotonic(), event))

    def alerts(self, prefix: str) -> list[tuple[float, AlertRaised]]:
        return [(t, e) for t, e in self.events
                if isinstance(e, AlertRaised) and e.alert.key.startswith(prefix)]


def night_config(tmp_path: Path, cluster: str, *, own_recipes: bool = False,
                 **console: object) -> Config:
    """The shipped config with only ``cluster``'s nodes, its state in tmp_path;
    ``own_recipes``: the recipes copied there too (a gate records its figures
    into the recipe)."""
    config = load_config(ROOT / "config.toml")
    keep = config.clusters[cluster].nodes
    recipes = config.recipes_dir
    if own_recipes:
        recipes = tmp_path / "recipes"
        shutil.copytree(config.recipes_dir, recipes)
    return dataclasses.replace(
        config, nodes={n: c for n, c in config.nodes.items() if n in keep},
        clusters={cluster: config.clusters[cluster]}, recipes_dir=recipes,
        console=dataclasses.replace(config.console, state_dir=str(tmp_path / "state"),
                                    **console))


@asynccontextmanager
async def night(tmp_path: Path, scenario: str, cluster: str, *, start: bool = True,
                own_recipes: bool = False, **console: object) -> AsyncIterator[Night]:
    """The night; ``start=False`` leaves starting the service to the test."""
    config = night_config(tmp_path, cluster, own_recipes=own_recipes, **console)
    async with running_sim(config, scenario=scenario, workdir=tmp_path / "sim") as sim:
        path = sim_endpoints_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sim.endpoints()))
        endpoints = resolve_endpoints(config)
        canary = completer_for(lambda node: endpoints.node(node).api_host)
        service = ClusterService(config, clock=sim.clock, endpoints=endpoints, canary=canary)
        n = Night(sim, config, service, canary)
        if start:
            await service.start(n.record)
        try:
            yield n
        finally:
            await service.stop()


PHONE = "notify.mobile_app_pixel_8"


def with_phone(n: Night) -> None:
    """Phone alerts on for this night (the shipped config has them off)."""
    n.config = dataclasses.replace(n.config, notify=dataclasses.replace(
        n.config.notify, service=PHONE))
    n.service.config = n.config
    n.service.night.policy.config = n.config.notify


async def start_lane(n: Night, recipe: str) -> None:
    r = load_recipe(n.config, recipe)
    for rank in plan(n.config, r, r.cluster).ranks:
        async with connect(n.sim, rank.node) as conn:
            result = await conn.run(rank.command(3), timeout=30)
            assert result.exit_status == 0, result.stderr


PACE = 30.0
"""Simulated seconds per real second at most, for `advance_until` through a
stretch where a node may hang: the product waits for a hung node on real time
(its held SSH probe fails after probe_timeout_s, 3 s; a new shell or
connection after connect_timeout_s, 10-11 s), so a budget in simulated
seconds holds only if simulated time cannot outrun real time. Unpaced, the
pace was whatever the host and the requests in flight made it: 4 simulated s
per real s while a canary request waited, ~200 when none did, and a thrash
alert due one probe timeout after the hang came 40 to 470 simulated s after
the prompt (tests/service/test_sentinel_sim.py)."""


async def advance_until(n: Night, pred: Callable[[], bool], *, step: float, max_sim_s: float,
                        pace: float | None = None,
                        why: Callable[[], str] = lambda: "") -> None:
    """Advance in steps of ``step`` simulated seconds until ``pred()`` holds
    (AssertionError after ``max_sim_s``), stopping at every sleeper's deadline
    within a step. Each stop is drained (`SimClock.advance`): what the product
    exchanges in this process over SSH, HTTP and the sentinel's socket (a poll,
    a canary round, an event on its way to a console) is done before time moves
    on, however loaded the host. ``pace`` (`PACE`): at most this many simulated
    seconds per real second, while a node may hang; a loaded host slows it,
    never speeds it."""
    loop = asyncio.get_running_loop()
    start, real0 = n.sim.clock.monotonic(), loop.time()
    await loop_idle()
    while not pred():
        spent = n.sim.clock.monotonic() - start
        assert spent < max_sim_s, why()
        if pace is not None and (ahead := spent / pace - (loop.time() - real0)) > 0:
            await asyncio.sleep(ahead)
        await n.sim.clock.advance(step, step=step, drain=True)


async def boot_unwatched(n: Night, recipe: str) -> None:
    """Start the lane and let it boot to serving before anything watches it
    (the simulator alone runs an hour of loading in a few seconds); a
    service started afterwards finds it by its labels and reads its log."""
    await start_lane(n, recipe)

    def ready() -> bool:
        try:
            return n.sim.lane_rank0(recipe).phase == "ready"
        except KeyError:
            return False

    # whole minutes: the simulated world runs its events in order whatever the step
    await n.sim.clock.step_until(ready, step=60.0, max_s=6 * 3600 - n.sim.clock.monotonic(),
                                 why=lambda: "the lane never became ready")


def recording_sentinel(n: Night) -> tuple[Sentinel, list[str]]:
    """The night's sentinel over its service (not started): the lines it
    prints are kept, and every event it publishes is recorded in ``n.events``
    as well."""
    lines: list[str] = []
    sentinel = Sentinel(n.config, n.service, clock=n.sim.clock,
                        emit=lambda priority, text: lines.append(text))
    publish = sentinel.on_event

    def record(event: ServiceEvent) -> None:
        n.record(event)
        publish(event)

    sentinel.on_event = record  # type: ignore[method-assign]
    return sentinel, lines


def phase(n: Night, lane: str) -> str:
    view = n.service.lanes().get(lane)
    return view.phase if view else "-"


@dataclass
class SentinelProcess:
    config: Config
    sim: Sim
    proc: asyncio.subprocess.Process
    argv: list[str]
    env: dict[str, str]


@asynccontextmanager
async def sentinel_process(tmp_path: Path, config_path: Path, *,
                           scenario: str | None = None) -> AsyncIterator[SentinelProcess]:
    """`sparktui sentinel` as its own process on ``config_path`` (its state in
    tmp_path), against a simulator at 20x; killed if the test left it running."""
    config = load_config(config_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("JOURNAL_STREAM", None)
    argv = [sys.executable, "-m", "sparktui", "--config", str(config_path), "sentinel"]
    async with running_sim(config, speed=20.0, scenario=scenario,
                           workdir=tmp_path / "sim") as sim:
        endpoints = sim_endpoints_path(config)
        endpoints.parent.mkdir(parents=True, exist_ok=True)
        endpoints.write_text(json.dumps(sim.endpoints()))
        proc = await asyncio.create_subprocess_exec(*argv, env=env,
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        sp = SentinelProcess(config, sim, proc, argv, env)
        try:
            yield sp
        finally:  # the process the test left there (a restart replaced the first)
            if sp.proc.returncode is None:
                sp.proc.kill()
                await sp.proc.wait()


def state_in(tmp_path: Path) -> Callable[[str], str]:
    """A config edit: the state directory in tmp_path."""
    return lambda text: text.replace('state_dir = "~/.local/state/sparktui"',
                                     f'state_dir = "{tmp_path / "state"}"')
