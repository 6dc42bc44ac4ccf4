"""The serving canary through the console's service against the simulator
(manual clock, real SSH and HTTP): an engine core that dies while its API
keeps answering /health is reported ``unresponsive`` within one canary
interval (plus the completion's timeout); a throughput collapse is thrash
evidence for the lane's nodes before their SSH starves."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sparktui.adapters.endpoints import resolve_endpoints, sim_endpoints_path
from sparktui.adapters.engine_http import Completion
from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertRaised, ServiceEvent
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import connect, running_sim
from sparktui.watch.canary import CANARY_TIMEOUT_S, Completer, completer_for

ROOT = Path(__file__).resolve().parents[2]


class Tracked:
    """The production completer, counting the rounds in flight: the test lets
    a round's real HTTP finish before it moves simulated time on (bounded, so
    a dead engine's round still times out on the simulated clock)."""

    def __init__(self, complete: Completer) -> None:
        self.complete = complete
        self.in_flight = 0

    async def __call__(self, node: str, port: int) -> Completion:
        self.in_flight += 1
        try:
            return await self.complete(node, port)
        finally:
            self.in_flight -= 1


@dataclass
class Night:
    sim: Sim
    config: Config
    service: ClusterService
    canary: Tracked
    events: list[tuple[float, ServiceEvent]] = field(default_factory=list)

    def alerts(self, prefix: str) -> list[tuple[float, AlertRaised]]:
        return [(t, e) for t, e in self.events
                if isinstance(e, AlertRaised) and e.alert.key.startswith(prefix)]


def night_config(tmp_path: Path, **console: object) -> Config:
    config = load_config(ROOT / "config.toml")
    return dataclasses.replace(config, console=dataclasses.replace(
        config.console, state_dir=str(tmp_path / "state"), **console))


@asynccontextmanager
async def night(tmp_path: Path, scenario: str, **console: object) -> AsyncIterator[Night]:
    config = night_config(tmp_path, **console)
    async with running_sim(config, scenario=scenario, workdir=tmp_path / "sim") as sim:
        path = sim_endpoints_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sim.endpoints()))
        endpoints = resolve_endpoints(config)
        canary = Tracked(completer_for(lambda node: endpoints.node(node).api_host))
        service = ClusterService(config, clock=sim.clock, endpoints=endpoints, canary=canary)
        n = Night(sim, config, service, canary)
        await service.start(lambda e: n.events.append((sim.clock.monotonic(), e)))
        try:
            yield n
        finally:
            await service.stop()


async def start_lane(n: Night, recipe: str) -> None:
    r = load_recipe(n.config, recipe)
    for rank in plan(n.config, r, r.cluster).ranks:
        async with connect(n.sim, rank.node) as conn:
            result = await conn.run(rank.command(3), timeout=30)
            assert result.exit_status == 0, result.stderr


async def advance_until(n: Night, pred: Callable[[], bool], *, step: float, max_sim_s: float,
                        why: Callable[[], str] = lambda: "") -> None:
    start = n.sim.clock.monotonic()
    while not pred():
        assert n.sim.clock.monotonic() - start < max_sim_s, why()
        await n.sim.clock.advance(step, step=step)  # coarse through quiet stretches
        await asyncio.sleep(0.01)  # real I/O (SSH polls, HTTP checks) between steps
        for _ in range(50):  # a canary round's HTTP, up to 0.5 s real
            if not n.canary.in_flight:
                break
            await asyncio.sleep(0.01)


def phase(n: Night, lane: str) -> str:
    view = n.service.lanes().get(lane)
    return view.phase if view else "-"


async def test_engine_dead_is_unresponsive_within_one_canary_interval(tmp_path: Path) -> None:
    lane = "glm53-flash-eugr-2x"
    async with night(tmp_path, "engine-dead", poll_interval_s=60.0) as n:
        interval = n.config.console.canary_interval_s
        await start_lane(n, lane)
        await advance_until(n, lambda: phase(n, lane) == "serving", step=60.0,
                            max_sim_s=3 * 3600, why=lambda: phase(n, lane))
        view = n.service.lanes()[lane]
        await advance_until(n, lambda: bool(n.service.lanes()[lane].canary), step=2.0,
                            max_sim_s=2 * interval)
        assert "1-token completion answered" in n.service.lanes()[lane].canary[0]
        assert not n.alerts("canary:")
        engine = n.sim.lane_rank0(lane)
        await advance_until(n, lambda: engine.core_dead, step=10.0, max_sim_s=900)
        died = n.sim.clock.monotonic()
        await advance_until(n, lambda: bool(n.alerts("canary:")), step=2.0,
                            max_sim_s=3 * interval, why=lambda: str(n.service.lanes()[lane]))
        at, raised = n.alerts("canary:")[0]
        assert at - died <= interval + CANARY_TIMEOUT_S + 2.0, (at - died)
        alert = raised.alert
        assert alert.level == "unresponsive" and alert.subject == lane
        assert alert.evidence[0] == ("/health answers 200 but a 1-token completion failed: "
                                     f"timed out after {CANARY_TIMEOUT_S:g} s")
        assert "no token processed" in alert.evidence[1]
        await advance_until(n, lambda: phase(n, lane) == "unresponsive", step=2.0,
                            max_sim_s=30)
        view = n.service.lanes()[lane]
        assert view.health == "ok"  # /health still answers: the canary is what tells
        assert view.canary == alert.evidence


async def test_throughput_collapse_is_thrash_evidence_before_ssh_starves(tmp_path: Path) -> None:
    lane = "glm53-mxfp4-fp8-4x-r39-196k"
    async with night(tmp_path, "throughput-collapse", poll_interval_s=20.0) as n:
        nodes = n.config.clusters["4nodes-switch-b"].nodes
        await start_lane(n, lane)
        await advance_until(n, lambda: phase(n, lane) == "serving", step=300.0,
                            max_sim_s=4 * 3600, why=lambda: phase(n, lane))
        await advance_until(n, lambda: bool(n.service.lanes()[lane].canary), step=5.0,
                            max_sim_s=300)
        assert not n.alerts("thrash:")
        n.sim.run_prompt(lane, 150_000)
        starved: dict[str, float] = {}

        def under() -> bool:
            for node in nodes:
                if n.sim.nodes[node].thrashing:
                    starved.setdefault(node, n.sim.clock.monotonic())
            return bool(starved) and bool(n.alerts("thrash:"))

        await advance_until(n, under, step=2.0, max_sim_s=600,
                            why=lambda: f"{starved} {n.alerts('thrash:')}")
        first_t, first = n.alerts("thrash:")[0]
        assert first.alert.level == "thrash suspected", first.alert
        assert any("throughput collapsed to 0" in e for e in first.alert.evidence), first.alert
        assert first_t < min(starved.values()), (first_t, starved)
        assert first.alert.subject in nodes
