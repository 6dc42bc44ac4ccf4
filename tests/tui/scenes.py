"""The screens the snapshot tests and `scripts/screenshots.py` capture, on the
scripted fleet with a frozen clock: one poll per node, fixed boot lines, no
time-varying text (uptimes come from docker's fixed ``Up 5 minutes``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from textual.pilot import Pilot
from textual.widgets import Input

from sparktui.core.state import NodeState
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import HelpScreen
from sparktui.tui.widgets.tables import LanesTable, NodesTable

from .fakecluster import GIB_KIB, add_lane, vllm_boot_lines
from .harness import Console, build, wait_for

LANE = "glm53-mxfp4-fp8-4x-r39"


def night(console: Console) -> None:
    """22:47 on the seeds' night: a lane loading on dgx5-8, dgx6 under pressure."""
    ranks = add_lane(console.fleet, LANE, "4nodes-switch-b", ["dgx5", "dgx6", "dgx7", "dgx8"])
    for rc in ranks:
        for line in vllm_boot_lines(shards=8, upto="loading"):
            rc.log.put_nowait(line)
        rc.status = "Up 7 minutes"
    for name in ("dgx5", "dgx7", "dgx8"):
        console.fleet.nodes[name].avail_kib = 14 * GIB_KIB
    dgx6 = console.fleet.nodes["dgx6"]
    dgx6.avail_kib = int(3.2 * GIB_KIB)
    dgx6.psi_some, dgx6.psi_full = 48.0, 27.5
    console.fleet.nodes["dgx4"].powered = False


async def settled(pilot: Pilot, console: Console) -> None:
    """Every node polled once and painted, the lane's backlog shown."""
    screen = console.app.main_screen

    def ready() -> bool:
        snap = console.service.snapshot()
        lanes = screen.query_one(LanesTable)
        return (all(s.state is not NodeState.UNKNOWN for s in snap.nodes)
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
    Scene("refusal-protected-node", (100, 36), refusal_modal),
    Scene("help-80x24", (80, 24), help_screen),
)


def scene_console() -> Console:
    console = build()
    night(console)
    return console
