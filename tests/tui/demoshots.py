"""The README's screenshots, taken from the states a new demo reaches:
`sparktui demo --scenario long-prompt` (its simulator, its console, its
palette) walked from the keyboard through the night it reproduces, on the
simulator's manual clock. `scripts/screenshots.py` writes them into
screenshots/; tests/tui/test_screenshots.py takes them again and fails when
a stored one differs from what the code renders now.

One run of the demo takes every shot, in the order an operator meets them:
the eight nodes online (help, a refused and a typed power-cycle confirm), the
palette's first step (serve the 196k lane: the cluster picker, the fit
refusal, its override), the lane loading (main screen, Lanes, Boot log, at
80x24 and 160x48), then the 150K prompt and the incident (the alert line and
the alerts list).

Deterministic by construction: simulated time moves only in drained steps
(`simconsole.run_for`), every wall-clock field is the simulator's (its night
starts 2026-11-29 22:00Z), and once nodes hang each step also waits, in real
time, for every node's poll to end (`settled_step`): a hung node's probe
fails after the real probe timeout, and the simulated time of that failure
(the alerts' times, the evidence's counts) must not depend on how fast the
host is."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable

from sparktui.adapters.endpoints import sim_endpoints_path
from sparktui.cli import demo_cmd
from sparktui.core.state import NodeState
from sparktui.service.cluster import ClusterService
from sparktui.sim.clock import loop_idle
from sparktui.sim.testing import running_sim
from sparktui.tui.app import SparkTUI, make_app
from sparktui.tui.screens.alerts import AlertsScreen
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import HelpScreen, PickerScreen
from sparktui.tui.widgets.tables import NodesTable
from sparktui.watch.lane_endpoint import ENGINE_TIMEOUT_S

from .harness import typed
from .screen_text import screen_text
from .simconsole import SimConsole, run_for, sim_config, until

SCENARIO = "long-prompt"
LANE = demo_cmd.LONG_PROMPT_LANE
SMALL, WIDE, MODAL = (80, 24), (160, 48), (100, 36)
LOADING_S = 20 * 60.0
"""How far into the lane's boot the loading shots are taken (its weights load
for ~54 simulated minutes)."""
INCIDENT_STEP_S = 240.0
"""Simulated seconds per settled step once the prompt is in: each costs the
real time a hung node's poll takes (its probe, then a login timeout), so few
and long; the FATAL (sample_tokens timed out) comes within two."""


@dataclass(frozen=True)
class Shot:
    name: str
    size: tuple[int, int]
    shows: str
    """What the picture shows (the README says so next to it)."""


SHOTS = (
    Shot("help-80x24", SMALL, "`?`: the keys"),
    Shot("refusal-protected-node", MODAL, "`P` on dgx2, a protected node: refused, with "
         "the nine steps it would have run"),
    Shot("confirm-power-cycle", MODAL, "`P` on dgx7: its plan and the typed confirm, the "
         "name typed"),
    Shot("cluster-picker-80x24", SMALL, "the palette's first step in this scenario, serve "
         "the 196k lane: on which cluster, each with its guards' verdict"),
    Shot("serve-refused-80x24", SMALL, "its own cluster refused by the fit (prefill "
         "scratch); `o` overrides it with the name typed"),
    Shot("main-80x24", SMALL, "the lane loading on dgx5-8, 20 simulated minutes in"),
    Shot("lanes-loading-80x24", SMALL, "its Lanes pane: an InstantTensor load prints no "
         "shards; Progress counts the weights resident against the recipe's per rank"),
    Shot("bootlog-80x24", SMALL, "its rank 0 boot log"),
    Shot("main-160x48", WIDE, "the four panes at once"),
    Shot("incident-80x24", SMALL, "the 150K prompt sent: the FATAL on the alert line, "
         "dgx6-8 STARVED, four nodes THRASH"),
    Shot("incident-alerts-80x24", SMALL, "`!`: the FATAL whole, its next step before its "
         "evidence"),
    Shot("incident-160x48", WIDE, "the incident in every pane"),
)
NAMES = tuple(s.name for s in SHOTS)
SETTLE_TRIES = 20
"""A shot is the screen once two exports in a row agree. Textual's
``Pilot.pause`` waits for CPU idle, at most a second, and a DataTable
measures its columns on its own Idle message: on a loaded host a shot taken
after one pause caught the Lanes' Phase column still as wide as `loading
weights` (5 of 9 demo nights beside two CPU hogs). A pane shown again
applies the rows it held back while hidden (the Lanes' row still read
`loading weights` at incident-80x24), so its table is measured only on a
later Idle: until then (DataTable's own ``_updated_cells`` and
``_require_update_dimensions``, read here) a shot is not taken, as two
agreeing exports of the stale widths still were (2 of 9 nights at load ~7)."""
TERMINAL_ID = re.compile(r"terminal-\d+")
"""Rich names an SVG's styles after a hash of its own text (export_svg's
unique_id); two renders of one screen share it, so only a screen's own
change moves it. Normalised in comparisons so a diff shows the screen's."""


def normalized(svg: str) -> str:
    return TERMINAL_ID.sub("terminal", svg)


@contextlib.asynccontextmanager
async def demo(workdir: Path) -> AsyncIterator[SimConsole]:
    """`sparktui demo --scenario long-prompt` as `cli/demo_cmd._demo` builds it
    (the simulator, the service on its clock, the console with the demo's
    palette entries and title), the simulator on its manual clock; the poll
    tick is the demo's at its shipped speed (`demo_console`)."""
    config = sim_config(workdir)
    speed = config.simulator.speed
    config = dataclasses.replace(config, console=demo_cmd.demo_console(config, speed))
    async with running_sim(config, scenario=SCENARIO, workdir=workdir / "sim") as sim:
        path = sim_endpoints_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sim.endpoints()))
        service = ClusterService(config, clock=sim.clock)
        holder: list[SparkTUI] = []
        app = make_app(config, service=service,
                       demo_commands=lambda: demo_cmd.triggers(sim, service, holder[0],
                                                               SCENARIO))
        holder.append(app)
        app.title_notes.append(f"SIMULATOR {SCENARIO} {speed:g}x")  # the demo's, at its speed
        yield SimConsole(sim, config, service, app)


async def settled_step(c: SimConsole, seconds: float) -> None:
    """One drained step, then every node's poll ended (a hung node's fails on
    the real probe timeout): its answer lands at this step's simulated time.
    Then the engine client's own (real) timeout passes too: a lane's /health
    asked at the step's end of an engine on a thrashing node (the simulator
    holds its answer in simulated time) times out now, as `no answer`, every
    time. Without that wait it sometimes was still in flight when the next
    step killed the engine and got its 503, and the incident-160x48 Health
    read `503` instead of `refused` (1 of 9 demo nights beside two CPU hogs)."""
    await run_for(c, seconds, step=seconds)
    assert c.service.poller is not None
    locks = c.service.poller._locks
    while any(lock.locked() for lock in locks.values()):
        await asyncio.sleep(0.02)
    await asyncio.sleep(ENGINE_TIMEOUT_S + 0.5)
    await loop_idle()


async def shoot(pilot: Pilot, shots: dict[str, str], name: str) -> None:
    (shot,) = [s for s in SHOTS if s.name == name]
    if pilot.app.size != shot.size:
        await pilot.resize_terminal(*shot.size)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    svg = ""
    for _ in range(SETTLE_TRIES):
        await pilot.pause()
        if any(t._updated_cells or t._require_update_dimensions
               for t in pilot.app.screen.query(DataTable)):
            continue  # a table not yet measured since its cells changed
        before, svg = svg, pilot.app.export_screenshot(title=f"sparktui demo — {name}")
        if svg == before:
            break
    else:
        raise AssertionError(f"{name}: the screen did not settle in {SETTLE_TRIES} pauses")
    shots[name] = svg


async def select_node(pilot: Pilot, c: SimConsole, node: str) -> None:
    table = c.app.main_screen.query_one(NodesTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(node))
    await pilot.pause()


async def on(c: SimConsole, screen: type, *, why: Callable[[], str] = lambda: "") -> None:
    await until(c, lambda: isinstance(c.app.screen, screen), why=why)


async def demo_night(workdir: Path) -> dict[str, str]:
    """Every shot of SHOTS (name -> SVG), from one run of the demo."""
    shots: dict[str, str] = {}
    async with demo(workdir) as c, c.app.run_test(size=SMALL) as pilot:
        app, service = c.app, c.service

        def online() -> bool:
            nodes = service.snapshot().nodes
            return len(nodes) == 8 and all(s.state is NodeState.ONLINE and s.probe is not None
                                           and s.probe.kernel for s in nodes)

        await until(c, online)
        await pilot.press("question_mark")
        await on(c, HelpScreen)
        await shoot(pilot, shots, "help-80x24")
        await pilot.press("escape")

        await pilot.resize_terminal(*MODAL)
        await select_node(pilot, c, "dgx2")
        await pilot.press("P")
        await on(c, RefusalScreen)
        await shoot(pilot, shots, "refusal-protected-node")
        await pilot.press("escape")
        await until(c, lambda: app.screen is app.main_screen)
        await select_node(pilot, c, "dgx7")
        await pilot.press("P")
        await on(c, ConfirmActionScreen)
        await typed(pilot, *"dgx7")
        await shoot(pilot, shots, "confirm-power-cycle")
        await pilot.press("escape")
        await until(c, lambda: app.screen is app.main_screen)
        await pilot.resize_terminal(*SMALL)

        # the palette's first entry under this scenario: serve the night's lane
        await pilot.press("colon")
        await until(c, lambda: f"serve {LANE} first" in screen_text(app))
        await pilot.press("enter")
        await on(c, PickerScreen)
        await shoot(pilot, shots, "cluster-picker-80x24")
        await pilot.press("enter")  # its own cluster, the first offered
        await on(c, RefusalScreen)
        await shoot(pilot, shots, "serve-refused-80x24")
        await pilot.press("o")
        await on(c, ConfirmActionScreen)
        await typed(pilot, *LANE)
        await pilot.press("enter")
        await until(c, lambda: app.screen is app.main_screen and LANE in service.lanes())

        await run_for(c, LOADING_S)
        assert service.lanes()[LANE].phase == "loading weights", service.lanes()[LANE]
        await shoot(pilot, shots, "main-80x24")
        await pilot.press("2")
        await shoot(pilot, shots, "lanes-loading-80x24")
        await pilot.press("3")
        await shoot(pilot, shots, "bootlog-80x24")
        await shoot(pilot, shots, "main-160x48")
        await pilot.resize_terminal(*SMALL)
        await pilot.press("1")

        # the serve's own end (its quality gate passed), as the operator waits for it
        await until(c, lambda: service.lanes()[LANE].gate == "qualified"
                    and not app.main_screen._workflows, step=300.0, max_sim_s=2 * 3600,
                    why=lambda: str(service.lanes()[LANE]))
        (send,) = [cmd[1] for cmd in demo_cmd.triggers(c.sim, service, app, SCENARIO)
                   if cmd[0] == f"demo: send the 150K prompt to {LANE}"]
        send()  # what its palette entry runs: refused (the envelope), overridden
        await on(c, RefusalScreen)
        await pilot.press("o")
        await on(c, ConfirmActionScreen)
        await typed(pilot, *LANE)
        await pilot.press("enter")
        await until(c, lambda: any(r.prompt_tokens == demo_cmd.LONG_PROMPT_TOKENS
                                   for r in c.sim.lane_rank0(LANE).requests))
        book = app.alerts
        for _ in range(4):
            await settled_step(c, INCIDENT_STEP_S)
            if f"fatal:{LANE}" in book.active:
                break
        assert f"fatal:{LANE}" in book.active, sorted(book.active)
        await shoot(pilot, shots, "incident-80x24")
        await pilot.press("exclamation_mark")
        await on(c, AlertsScreen)
        await shoot(pilot, shots, "incident-alerts-80x24")
        await pilot.press("escape")
        await until(c, lambda: app.screen is app.main_screen)
        await shoot(pilot, shots, "incident-160x48")
    assert tuple(shots) == NAMES, shots.keys()
    return shots
