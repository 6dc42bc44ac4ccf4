"""Running the simulator as a service for other processes: the endpoints
file `<state_dir>/sim/endpoints.json` (docs/CONTRACTS.md) exists exactly as
long as the simulator runs."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sparktui.core.config import Config

from .cluster import Sim
from .spec import spec_from_config


def endpoints_path(config: Config) -> Path:
    return config.state_dir() / "sim" / "endpoints.json"


@asynccontextmanager
async def published_sim(config: Config, *, scenario: str | None = None,
                        speed: float | None = None,
                        seed: int | None = None) -> AsyncIterator[Sim]:
    """Start the simulator for `config` at `speed` (default: the config's) and
    publish its endpoints; both are gone when the block ends."""
    spec = spec_from_config(config, seed=seed)
    base = config.state_dir() / "sim"
    workdir = base / f"run-{os.getpid()}"
    sim = Sim(spec, workdir=workdir, speed=speed or config.simulator.speed,
              scenario=scenario or config.simulator.scenario)
    path = endpoints_path(config)
    try:
        await sim.start()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sim.endpoints()) + "\n")
        tmp.replace(path)
        yield sim
    finally:
        path.unlink(missing_ok=True)
        await sim.stop()
        shutil.rmtree(workdir, ignore_errors=True)
