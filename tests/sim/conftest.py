"""Fixtures for the simulator's own tests: the shipped fleet on a manual clock,
and `serve`, which launches a recipe's ranks over SSH exactly as rendered."""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import connect, running_sim

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def fleet() -> Config:
    return load_config(ROOT / "config.toml")


async def exec_on(sim: Sim, node: str, command: str, timeout: float = 10.0) -> tuple[str, str,
                                                                                      int]:
    async with connect(sim, node) as conn:
        r = await conn.run(command, timeout=timeout)
        return str(r.stdout), str(r.stderr), int(r.exit_status or 0)


@pytest.fixture
def serve(fleet: Config) -> Callable[..., Awaitable[list[tuple[str, str, str, int]]]]:
    """Run each rank's rendered `docker run` on its node (GID index 3, as the sim's
    sysfs shows). Returns (node, stdout, stderr, status) per rank."""

    async def run(sim: Sim, recipe_name: str, cluster: str | None = None) \
            -> list[tuple[str, str, str, int]]:
        recipe = load_recipe(fleet, recipe_name)
        p = plan(fleet, recipe, cluster or recipe.cluster)
        out = []
        for rank in p.ranks:
            stdout, stderr, status = await exec_on(sim, rank.node, rank.command(3))
            out.append((rank.node, stdout, stderr, status))
        return out

    return run


@pytest.fixture
async def sim(fleet: Config) -> AsyncIterator[Sim]:
    async with running_sim(fleet, scenario="normal") as s:
        yield s
        assert s.sched.errors == []


def logs_cmd(container: str) -> str:
    return f"docker logs --timestamps {shlex.quote(container)} 2>&1"


@pytest.fixture(autouse=True)
def no_simulator_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every simulator these tests start must end without a process having raised."""
    stop = Sim.stop

    async def checked(self: Sim) -> None:
        await stop(self)
        assert self.sched.errors == [], self.sched.errors

    monkeypatch.setattr(Sim, "stop", checked)
