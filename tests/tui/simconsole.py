"""The console on the simulator: real SSH, real Home Assistant and engine HTTP
on loopback, the shipped fleet, reached exactly as production reaches it
(endpoints file -> `ClusterService` -> Fleet / HomeAssistant).

The simulator runs on its manual clock: simulated time moves only when a test
steps it (`until`, `run_for`), and only once every in-process exchange the
last step started (SSH probes, log reads, health checks) has finished. So a
bound on the simulated clock (a canary's 10 s, a log read's catch-up) never
fires because the host was slow, and how many simulated seconds a test spends
does not depend on how busy the machine is."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from textual.pilot import Pilot

from sparktui.adapters.endpoints import sim_endpoints_path
from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.service.cluster import ClusterService
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import running_sim
from sparktui.tui.app import SparkTUI, make_app

from .screen_text import screen_text

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
POLL_S = 30.0
"""Simulated poll interval: often enough, without burning the CPU."""
STEP_S = POLL_S
"""Simulated seconds per step of `until`: one poll round of every node."""
PACE = 300.0
"""Simulated seconds per real second at most, for waits that real time ends."""


@dataclass
class SimConsole:
    sim: Sim
    config: Config
    service: ClusterService
    app: SparkTUI


def sim_config(tmp_path: Path) -> Config:
    """The shipped config at POLL_S, its slow tier as many ticks apart as
    shipped (15 s at 30 s a tick would make every tick a slow one)."""
    config = load_config(ROOT / "config.toml")
    console = dataclasses.replace(config.console.with_tick(POLL_S),
                                  state_dir=str(tmp_path / "state"))
    return dataclasses.replace(config, console=console)


@asynccontextmanager
async def sim_console(tmp_path: Path, scenario: str = "normal", *,
                      read_only: bool = False,
                      config: Config | None = None) -> AsyncIterator[SimConsole]:
    """``config``: another than `sim_config` (e.g. one whose recipes are a copy)."""
    config = config or sim_config(tmp_path)
    async with running_sim(config, scenario=scenario, workdir=tmp_path / "sim") as sim:
        path = sim_endpoints_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sim.endpoints()))
        service = ClusterService(config, clock=sim.clock)
        yield SimConsole(sim, config, service, make_app(config, service=service,
                                                         read_only=read_only))


async def run_for(c: SimConsole, seconds: float, *, step: float = STEP_S) -> None:
    """Let ``seconds`` of simulated time pass, in whole drained steps."""
    await c.sim.clock.advance(seconds, step=step, drain=True, whole_steps=True)


async def until(c: SimConsole, predicate: Callable[[], object], *, max_sim_s: float = 3600.0,
                step: float = STEP_S, pace: float | None = None,
                why: Callable[[], str] = lambda: "") -> None:
    """Step simulated time until ``predicate()`` holds: `SimClock.step_until`
    (whole steps, each drained: the app's messages are processed too). The
    running console paints once per step, when the step's work is done, not at
    60 frames a second meanwhile (the frames of simulated minutes nobody looks
    at cost most of a test's CPU); predicates read widget data, `shown` the screen."""
    def check() -> object:
        paint_now(c.app)
        return predicate()

    with painting_held(c.app):
        await c.sim.clock.step_until(check, step=step, max_s=max_sim_s, pace=pace, why=why)


@contextmanager
def painting_held(app: SparkTUI) -> Iterator[None]:
    """No repaint of a running ``app`` for the block but `paint_now`'s (one
    more after it)."""
    if not app.is_running:
        yield
        return
    with app.batch_update():
        yield


def paint_now(app: SparkTUI) -> None:
    """One repaint of what changed, now, even inside `painting_held` (what
    `Pilot.pause` does after its wait)."""
    if not app.is_running:
        return
    held, app._batch_count = app._batch_count, 0
    try:
        app.screen._on_timer_update()
    finally:
        app._batch_count = held


async def done(c: SimConsole, aw: Awaitable[T], *, max_sim_s: float = 3600.0) -> T:
    """``aw``'s result, stepping simulated time until it has one."""
    task = asyncio.ensure_future(aw)
    try:
        await until(c, task.done, max_sim_s=max_sim_s)
    finally:
        task.cancel()
    return task.result()


async def shown(pilot: Pilot, predicate: Callable[[str], bool], timeout: float = 10.0) -> str:
    """The screen's text once ``predicate`` holds for it: a key's effect is
    painted a frame later (no simulated time passes meanwhile)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate(text := screen_text(pilot.app)):
        if loop.time() > end:
            raise AssertionError(f"not on screen after {timeout:g} s:\n{text}")
        await pilot.pause(0.05)
    return text
