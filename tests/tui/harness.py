"""Build the console on the shipped config over the fake fleet, with a
deterministic clock, the same way the CLI does (through `make_app`)."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.service.cluster import ClusterService
from sparktui.tui.app import SparkTUI, make_app

from .fakecluster import FakeFleet, FakePower, fake_endpoints, fake_fleet

ROOT = Path(__file__).resolve().parents[2]
EPOCH = 1_795_999_200.0
"""2026-11-29 22:40:00 UTC, the night of the fake boots."""


class ScaledClock:
    """Wall time frozen at EPOCH plus ``speed`` x real time; sleeps are
    ``1/speed`` as long. ``speed=0`` freezes time and makes sleeps real."""

    def __init__(self, speed: float = 0.0) -> None:
        self.speed = speed
        self._start = asyncio.get_event_loop().time() if speed else 0.0

    def _elapsed(self) -> float:
        if not self.speed:
            return 0.0
        return (asyncio.get_event_loop().time() - self._start) * self.speed

    def time(self) -> float:
        return EPOCH + self._elapsed()

    def monotonic(self) -> float:
        return self._elapsed()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds / self.speed if self.speed else seconds)


@dataclass
class Console:
    config: Config
    fleet: FakeFleet
    power: FakePower
    service: ClusterService
    app: SparkTUI


def build(*, read_only: bool = False, speed: float = 0.0, config: Config | None = None,
          state_dir: Path | None = None) -> Console:
    """The journal and run locks go to ``state_dir`` (a fresh temp dir by default)."""
    config = config or load_config(ROOT / "config.toml")
    fleet = fake_fleet(config)
    power = FakePower(fleet, config)
    clock = ScaledClock(speed)
    service = ClusterService(config, links=fleet, endpoints=fake_endpoints(config),
                             clock=clock, liveness=fleet.alive, power=power,
                             state_dir=state_dir or Path(tempfile.mkdtemp(prefix="sparktui-")))
    app = make_app(config, service=service, read_only=read_only)
    return Console(config, fleet, power, service, app)


async def wait_for(pilot: object, predicate, timeout: float = 5.0) -> None:
    """Let the app run until ``predicate()`` holds (fails the test on timeout)."""
    loop = asyncio.get_event_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)  # type: ignore[attr-defined]


async def typed(pilot: object, *keys: str) -> None:
    """``pilot.press(*keys)`` with the app's painting held until the last key is
    handled: every key takes the same path (bindings, focus, the Input), only
    the frames between keystrokes, which nobody looks at, are not painted (a
    typed lane name cost a repaint per letter)."""
    with pilot.app.batch_update():  # type: ignore[attr-defined]
        await pilot.press(*keys)  # type: ignore[attr-defined]
