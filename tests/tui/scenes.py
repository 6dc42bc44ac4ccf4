"""The screens the snapshot tests and `scripts/screenshots.py` capture, on the
scripted fleet with a frozen clock: one poll per node, fixed boot lines, no
time-varying text (uptimes come from docker's fixed ``Up 5 minutes``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from textual.pilot import Pilot
from textual.widgets import Input

from sparktui.core.config_load import load_config
from sparktui.core.state import NodeState
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import HelpScreen
from sparktui.tui.widgets.tables import LanesTable, NodesTable

from .fakecluster import GIB_KIB, add_lane, vllm_boot_lines
from .harness import ROOT, Console, build, wait_for

LANE = "glm53-mxfp4-fp8-4x-r39"


SAMPLES = 24
"""Polls per node in a scene (its memory history)."""


def ramp(start: float, end: float, n: int = SAMPLES) -> list[float]:
    return [start + (end - start) * (i / (n - 1)) ** 2 for i in range(n)]


def night(console: Console) -> None:
    """22:47 on the seeds' night: a lane loading on dgx5-8, dgx6 under pressure."""
    ranks = add_lane(console.fleet, LANE, "4nodes-switch-b", ["dgx5", "dgx6", "dgx7", "dgx8"])
    for rc in ranks:
        for line in vllm_boot_lines(shards=8, upto="loading"):
            rc.log.put_nowait(line)
        rc.status = "Up 7 minutes"
    for name in ("dgx1", "dgx2", "dgx3"):
        console.fleet.nodes[name].series = [(110 * GIB_KIB + (i % 5) * 40_000, 0.0)
                                            for i in range(SAMPLES)]
    for name in ("dgx5", "dgx7", "dgx8"):
        console.fleet.nodes[name].series = [(int(g * GIB_KIB), 0.0)
                                            for g in ramp(108.0, 14.0)]
    dgx6 = console.fleet.nodes["dgx6"]
    dgx6.series = [(int(g * GIB_KIB), p) for g, p in
                   zip(ramp(106.0, 3.2), ramp(0.0, 27.5), strict=True)]
    dgx6.psi_some = 48.0
    console.fleet.nodes["dgx4"].powered = False


async def settled(pilot: Pilot, console: Console) -> None:
    """Every node polled once and painted, the lane's backlog shown."""
    screen = console.app.main_screen

    def ready() -> bool:
        snap = console.service.snapshot()
        lanes = screen.query_one(LanesTable)
        polled = all(n.probes == len(n.series) for n in console.fleet.nodes.values()
                     if n.series)
        return (polled and all(s.state is not NodeState.UNKNOWN for s in snap.nodes)
                and not screen._pending_nodes and lanes.row_count == 1
                and "loading" in str(lanes.get_cell(LANE, "phase")))

    await wait_for(pilot, ready)
    await pilot.pause(0.3)


async def select_node(pilot: Pilot, console: Console, node: str) -> None:
    table = console.app.main_screen.query_one(NodesTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(node))
    await pilot.pause()


@dataclass(frozen=True)
class Scene:
    name: str
    size: tuple[int, int]
    steps: Callable[[Pilot, Console], Awaitable[None]]


async def main_screen(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)


async def confirm_modal(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await select_node(pilot, c, "dgx7")
    await pilot.press("P")
    await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen))
    c.app.screen.query_one("#typed", Input).value = "dgx7"
    await pilot.pause(0.2)


async def refusal_modal(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await select_node(pilot, c, "dgx2")
    await pilot.press("P")
    await wait_for(pilot, lambda: isinstance(c.app.screen, RefusalScreen))
    await pilot.pause(0.2)


async def help_screen(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: isinstance(c.app.screen, HelpScreen))
    await pilot.pause(0.2)


SCENES = (
    Scene("main-160x48", (160, 48), main_screen),
    Scene("main-80x24", (80, 24), main_screen),
    Scene("confirm-power-cycle", (100, 36), confirm_modal),
    Scene("confirm-power-cycle-80x24", (80, 24), confirm_modal),
    Scene("refusal-protected-node", (100, 36), refusal_modal),
    Scene("help-80x24", (80, 24), help_screen),
)


def scene_console() -> Console:
    config = load_config(ROOT / "config.toml")
    config = dataclasses.replace(config, console=dataclasses.replace(
        config.console, poll_interval_s=0.02))
    console = build(config=config)
    night(console)
    return console
