"""Running `sparktui` commands against the simulator inside a test: the sim runs
on the test's event loop, the command in a worker thread with its own loop (as
`sparktui` runs it: `asyncio.run`), stdin replaced. Shared by tests/cli/test_*
(loaded by path: the tests directory is not a package)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sparktui.cli.main import main
from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import running_sim

ROOT = Path(__file__).resolve().parents[2]


def fleet(tmp_path: Path) -> Config:
    """The shipped config with its state dir (journal, runlocks, sim endpoints) in tmp_path."""
    text = (ROOT / "config.toml").read_text().replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{tmp_path / "state"}"')
    text = text.replace('recipes_dir = "recipes"', f'recipes_dir = "{ROOT / "recipes"}"')
    text = text.replace("stall_after_s = 900.0", "stall_after_s = 7200.0")
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path)


@asynccontextmanager
async def published(config: Config, scenario: str = "normal",
                    speed: float = 400.0) -> AsyncIterator[Sim]:
    async with running_sim(config, scenario=scenario, speed=speed) as sim:
        path = config.state_dir() / "sim" / "endpoints.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sim.endpoints()))
        yield sim


class Terminal(io.StringIO):
    """A stdin that says it is a terminal, with the operator's answer in it."""

    def isatty(self) -> bool:
        return True


async def sparktui(config: Config, *argv: str, stdin: io.StringIO | None = None,
                   monkeypatch=None) -> int:  # type: ignore[no-untyped-def]
    """Exit code of `sparktui --config CONFIG ARGV...` (stdout/stderr: capsys)."""
    assert monkeypatch is not None
    monkeypatch.setattr("sys.stdin", stdin or io.StringIO(""))
    monkeypatch.delenv("SPARKTUI_HA_TOKEN", raising=False)
    return await asyncio.to_thread(main, ["--config", str(config.path), *argv])
