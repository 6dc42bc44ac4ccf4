"""Helpers for tests of every layer (no pytest here): start a simulated
cluster for the length of a block, and reach its nodes the way production does.

    async with running_sim(config, scenario="long-prompt") as sim:
        async with connect(sim, "dgx5") as conn:
            print((await conn.run("uname -r", timeout=5)).stdout)
        await sim.advance(600)          # manual clock (speed=None)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncssh

from sparktui.core.config import Config

from .cluster import Sim
from .spec import SimSpec, spec_from_config


@asynccontextmanager
async def running_sim(config: Config | None = None, *, spec: SimSpec | None = None,
                      scenario: str | None = None, seed: int | None = None,
                      speed: float | None = None,
                      workdir: Path | None = None) -> AsyncIterator[Sim]:
    """A started simulator; manual clock unless `speed` is given. Give a `config`
    (the shipped fleet) or a ready `spec` (e.g. `small_spec(64)`)."""
    if spec is None:
        if config is None:
            raise ValueError("running_sim needs a config or a spec")
        spec = spec_from_config(config, seed=seed)
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="sparktui-sim-")) if workdir is None else workdir
    sim = Sim(spec, workdir=root, speed=speed, scenario=scenario)
    try:
        await sim.start()
        yield sim
        if sim.ha is not None and sim.ha.banned:
            raise AssertionError(f"the simulated Home Assistant banned {sorted(sim.ha.banned)} "
                                 f"after failed logins: a refused token was retried")
    finally:
        await sim.stop()
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)


def connect(sim: Sim, node: str, **kwargs: object) -> asyncssh.SSHClientConnection:
    """An asyncssh connection to a sim node, verifying its host key."""
    ep = sim.endpoints()["nodes"][node]
    options: dict[str, object] = {
        "known_hosts": str(sim.known_hosts_path), "client_keys": [str(sim.client_key_path)],
        "username": sim.nodes[node].spec.user, "connect_timeout": 10}
    options.update(kwargs)
    return asyncssh.connect(ep["host"], ep["port"], **options)  # type: ignore[return-value]
