"""The console on the simulator: real SSH, real Home Assistant and engine HTTP
on loopback, the shipped fleet, reached exactly as production reaches it
(endpoints file -> `ClusterService` -> Fleet / HomeAssistant)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from sparktui.adapters.endpoints import sim_endpoints_path
from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.service.cluster import ClusterService
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import running_sim
from sparktui.tui.app import SparkTUI, make_app

ROOT = Path(__file__).resolve().parents[2]
SPEED = 300.0
"""Simulated seconds per real second: a 35 s plug-off wait takes ~0.1 s."""
POLL_S = 30.0
"""Simulated poll interval (0.1 s real): often enough, without burning the CPU."""


@dataclass
class SimConsole:
    sim: Sim
    config: Config
    service: ClusterService
    app: SparkTUI


def sim_config(tmp_path: Path) -> Config:
    config = load_config(ROOT / "config.toml")
    console = dataclasses.replace(config.console, state_dir=str(tmp_path / "state"),
                                  poll_interval_s=POLL_S)
    return dataclasses.replace(config, console=console)


@asynccontextmanager
async def sim_console(tmp_path: Path, scenario: str = "normal", *, speed: float = SPEED,
                      read_only: bool = False) -> AsyncIterator[SimConsole]:
    config = sim_config(tmp_path)
    async with running_sim(config, scenario=scenario, speed=speed,
                           workdir=tmp_path / "sim") as sim:
        path = sim_endpoints_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sim.endpoints()))
        service = ClusterService(config, clock=sim.clock)
        yield SimConsole(sim, config, service, make_app(config, service=service,
                                                         read_only=read_only))


async def until(pilot: object, predicate: Callable[[], bool], timeout: float = 20.0,
                why: Callable[[], str] = lambda: "") -> None:
    """Let the app and the simulator run until ``predicate()`` holds."""
    loop = asyncio.get_event_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise AssertionError(f"condition not reached in {timeout} s: {why()}")
        await pilot.pause(0.05)  # type: ignore[attr-defined]
