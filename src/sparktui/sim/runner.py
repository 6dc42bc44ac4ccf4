"""Running the simulator as a service for other processes: the endpoints
file `<state_dir>/sim/endpoints.json` (docs/CONTRACTS.md) exists exactly as
long as the simulator runs."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psutil

from sparktui.adapters.endpoints import (
    EndpointError,
    SimEndpointsFile,
    read_sim_endpoints,
    sim_endpoints_path,
)
from sparktui.core.config import Config
from sparktui.ops.files import replace_file
from sparktui.ops.private import FILE_MODE, private_dir

from .cluster import Sim
from .spec import spec_from_config


class AlreadyRunning(Exception):
    """Another simulator publishes endpoints for this state directory."""


def running_pid(config: Config) -> int | None:
    """The pid of a live simulator that published endpoints here, if any."""
    try:
        pid = read_sim_endpoints(sim_endpoints_path(config)).pid
    except EndpointError:
        return None
    if pid is None or pid == os.getpid():
        return None
    return pid if psutil.pid_exists(pid) else None


@asynccontextmanager
async def published_sim(config: Config, *, scenario: str | None = None,
                        speed: float | None = None, seed: int | None = None,
                        dialect: str | None = None) -> AsyncIterator[Sim]:
    """Start the simulator for `config` at `speed` (default: the config's) and
    publish its endpoints; both are gone when the block ends. Raises
    AlreadyRunning when another live simulator owns the endpoints file."""
    other = running_pid(config)
    if other is not None:
        raise AlreadyRunning(f"a simulator (pid {other}) already publishes "
                             f"{sim_endpoints_path(config)}")
    spec = spec_from_config(config, seed=seed)
    if dialect is not None:  # the flag wins over the config and the scenario
        spec.dialect, spec.dialect_pinned = dialect, True
    workdir = private_dir(config.state_dir(), "sim", f"run-{os.getpid()}")
    sim = Sim(spec, workdir=workdir, speed=speed or config.simulator.speed,
              scenario=scenario or config.simulator.scenario)
    path = sim_endpoints_path(config)
    try:
        await sim.start()
        published = SimEndpointsFile.parse(sim.endpoints(), str(path))
        replace_file(path, json.dumps(published.to_json()) + "\n", FILE_MODE)
        yield sim
    finally:
        path.unlink(missing_ok=True)
        await sim.stop()
        shutil.rmtree(workdir, ignore_errors=True)
