"""Fixtures for the workflow tests: the shipped fleet on the simulator (real SSH
and HTTP on loopback) with the state dir in tmp_path, and the production
context built over it exactly as `sparktui` builds it."""

from __future__ import annotations

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
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import running_sim


class Recorder:
    """An ``emit`` that keeps every event."""

    def __init__(self) -> None:
        self.events: list[WorkflowEvent] = []

    def __call__(self, event: WorkflowEvent) -> None:
        self.events.append(event)

    def of(self, kind: type[WorkflowEvent]) -> list[WorkflowEvent]:
        return [e for e in self.events if isinstance(e, kind)]


SPEED = 400.0
"""Simulated seconds per real second: a 35 s plug-off wait takes ~0.09 s."""


def slow_ci_margins(text: str) -> str:
    """At SPEED, the 600 s boot timeout and the 900 s stall window are 1.5 s and
    2.25 s of real time: wide enough here, not on a loaded 2-core CI machine.
    Tests that want a stall or a timeout set their own."""
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
    """``async with sim_ctx(scenario) as (sim, ctx, events):``"""

    @asynccontextmanager
    async def make(scenario: str = "normal", speed: float = SPEED,
                   config: Config | None = None) -> AsyncIterator[tuple[Sim, OpsContext,
                                                                         Recorder]]:
        cfg = config or fleet_config
        async with running_sim(cfg, scenario=scenario, speed=speed) as sim:
            path = cfg.state_dir() / "sim" / "endpoints.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(sim.endpoints()))
            events = Recorder()
            async with open_context(cfg, emit=events, clock=sim.clock) as ctx:
                yield sim, ctx, events

    return make
