"""Fixtures for the workflow tests: the shipped fleet on the simulator (real SSH
and HTTP on loopback) with the state dir in tmp_path, and the production
context built over it exactly as `sparktui` builds it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.ops.context import OpsContext, open_context
from sparktui.ops.events import WorkflowEvent
from sparktui.sim.clock import SimClock, loop_idle
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import running_sim


class Recorder:
    """An ``emit`` that keeps every event."""

    def __init__(self) -> None:
        self.events: list[WorkflowEvent] = []
        self.hooks: list[Callable[[WorkflowEvent], None]] = []
        """Called with each event as it is emitted (inside the workflow's task)."""

    def __call__(self, event: WorkflowEvent) -> None:
        self.events.append(event)
        for hook in self.hooks:
            hook(event)

    def of(self, kind: type[WorkflowEvent]) -> list[WorkflowEvent]:
        return [e for e in self.events if isinstance(e, kind)]


SPEED = 400.0
"""Simulated seconds per real second, for the tests that run a real process
beside the simulator (its waits are real time): a 35 s plug-off wait takes
~0.09 s."""

MIN_STEP_S = 1.0
"""The manual clock's shortest step while a test waits (`drive_clock`)."""
MAX_STEP_S = 30.0
"""... and its longest."""
PACE = 4000.0
"""Simulated seconds per real second at most (`drive_clock`): ten times the
speed clock's 400, and a wait that only real time ends costs sleep, not CPU."""


async def drive_clock(clock: SimClock, *, min_step: float = MIN_STEP_S,
                      max_step: float = MAX_STEP_S, pace: float | None = PACE) -> None:
    """The manual clock for a test that awaits its workflows directly: whenever
    the event loop is idle (every in-process SSH and HTTP exchange done, every
    task waiting), simulated time moves on to the earliest sleeper's deadline,
    but by ``min_step`` at least (what is due sooner wakes then, in deadline
    order, late by less than a step, as on a busy host) and ``max_step`` at
    most; each stop is drained (what the woken tasks start is finished before
    time moves again). So simulated time never passes while the host is busy,
    a quiet wait costs a stop rather than real time, and a run does not
    depend on how loaded the host is. ``pace``: at most this many simulated
    seconds per real second, for waits that real time ends (a hung node's SSH
    probe, a hung Home Assistant call): time runs on beside them, as on the
    speed clock, not as fast as the CPU can step it."""
    loop = asyncio.get_running_loop()
    real0, sim0 = loop.time(), clock.monotonic()
    while True:
        await loop_idle()
        now = clock.monotonic()
        if pace is not None and (ahead := (now - sim0) / pace - (loop.time() - real0)) > 0:
            await asyncio.sleep(ahead)
            continue
        due = clock.next_deadline()
        gap = max_step if due is None else min(max(due - now, min_step), max_step)
        await clock.advance(gap, step=gap, drain=True, whole_steps=True)


def slow_ci_margins(text: str) -> str:
    """The 600 s boot timeout and the 900 s stall window: on the speed clock
    they were 1.5 s and 2.25 s of real time, not enough on a loaded 2-core CI
    machine; on the manual clock a boot's few stops each take the host's
    time. Tests that want a stall or a timeout set their own."""
    return text.replace("boot_timeout_s = 600.0", "boot_timeout_s = 7200.0").replace(
        "stall_after_s = 900.0", "stall_after_s = 7200.0")


@pytest.fixture
def fleet_config(config_copy: Callable[..., Path], tmp_path: Path) -> Config:
    state = tmp_path / "state"

    def edit(text: str) -> str:
        return slow_ci_margins(
            text.replace('state_dir = "~/.local/state/sparktui"', f'state_dir = "{state}"'))

    return load_config(config_copy(edit))


@pytest.fixture
def sim_ctx(fleet_config: Config) -> Callable[..., Any]:
    """``async with sim_ctx(scenario) as (sim, ctx, events):``

    ``dialect``: the vLLM release the simulated engines speak (default vllm-0.33).

    By default the simulator runs on its manual clock, moved by `drive_clock`
    (``min_step``, ``pace``) while the block runs: the block awaits its workflows
    as production does. ``speed=None``: the manual clock, moved by the test
    itself; ``speed=N``: the real-time clock (a real process beside the
    simulator)."""

    @asynccontextmanager
    async def make(scenario: str = "normal", speed: float | str | None = "driven",
                   config: Config | None = None, min_step: float = MIN_STEP_S,
                   pace: float | None = PACE, dialect: str | None = None,
                   ) -> AsyncIterator[tuple[Sim, OpsContext, Recorder]]:
        cfg = config or fleet_config
        driven = speed == "driven"
        async with running_sim(cfg, scenario=scenario,
                               speed=None if driven else speed) as sim:  # type: ignore[arg-type]
            if dialect is not None:  # what the vLLM engines started from now on speak
                sim.spec.dialect = dialect
            path = cfg.state_dir() / "sim" / "endpoints.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(sim.endpoints()))
            events = Recorder()
            driver = (asyncio.create_task(drive_clock(sim.clock, min_step=min_step, pace=pace))
                      if driven else None)
            try:
                async with open_context(cfg, emit=events, clock=sim.clock) as ctx:
                    yield sim, ctx, events
            finally:
                if driver is not None:
                    driver.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await driver

    return make
