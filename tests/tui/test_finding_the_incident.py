"""Issue 28 item 6, finding the incident, at 80x24: the palette offers the
running scenario's trigger first and, before its lane serves, says which lane
to serve (and serves it); `demo --list-scenarios` loads no console, service
or simulator; the serve confirm of a protected lane says so before it serves
(the first word of it was the refusal at `x`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.cli import demo_cmd
from sparktui.core.state import NodeState
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import PickerScreen

from .harness import build, wait_for
from .screen_text import screen_text
from .simconsole import shown, sim_console, until

LANE = demo_cmd.LONG_PROMPT_LANE


@pytest.mark.parametrize("scenario", ["long-prompt", "boot-d-oom"])
async def test_the_palette_offers_the_running_scenarios_trigger_first(scenario: str) -> None:
    c = build()
    c.app.demo_commands = lambda: demo_cmd.triggers(None, c.service, c.app,  # type: ignore[arg-type]
                                                    scenario)
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(s.probe is not None
                                          for s in c.service.snapshot().nodes), timeout=20)
        await pilot.press("colon")
        first = f"demo: long prompt 1/2 — serve {LANE} first"
        await wait_for(pilot, lambda: first in screen_text(c.app)
                       and "demo: Boot D" in screen_text(c.app), timeout=20)
        rows = [r for r in screen_text(c.app).splitlines() if r.lstrip().startswith("demo:")]
        assert rows and (first in rows[0]) is (scenario == "long-prompt"), rows
        assert ("Boot D" in rows[0]) is (scenario == "boot-d-oom"), rows
        assert any(first in r for r in rows) and any("Boot D" in r for r in rows), rows
        if scenario == "long-prompt":  # it serves that lane: the cluster picker, verdicts
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(c.app.screen, PickerScreen), timeout=15)
            assert f"Serve {LANE} on which cluster?" in screen_text(c.app)


def test_listing_the_scenarios_loads_no_console_service_or_simulator() -> None:
    """It took 9 s on a loaded host: the console, the service and the
    simulator were imported to print a table."""
    import json
    import os
    import subprocess
    import sys

    program = ("import json, sys; from sparktui.cli.main import main; code = main(sys.argv[1:]); "
               "print(json.dumps({'code': code, 'heavy': sorted(m for m in sys.modules if m in "
               "('textual', 'aiohttp', 'asyncssh', 'sparktui.sim.cluster', "
               "'sparktui.service.cluster'))}))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run([sys.executable, "-c", program, "demo", "--list-scenarios"],
                          env=env, capture_output=True, text=True, timeout=120, check=True)
    out = done.stdout.splitlines()
    assert out[0].startswith("normal ") and len(out) == len(demo_cmd.SCENARIOS) + 1, out
    assert json.loads(out[-1]) == {"code": 0, "heavy": []}, out[-1]

PROTECTED = "glm53-flash-eugr-2x"
"""[guards] protected_lanes of the shipped config."""


async def test_the_serve_confirm_of_a_protected_lane_says_it_is_protected(
        tmp_path: Path) -> None:
    async with sim_console(tmp_path) as c, c.app.run_test(size=(80, 24)) as pilot:
        assert PROTECTED in c.config.guards.protected_lanes
        await until(c, lambda: all(s.state is NodeState.ONLINE
                                   for s in c.service.snapshot().nodes))
        # its own pair is production: on the free four; then an unprotected lane
        for recipe, protected in ((PROTECTED, True), ("glm53-mxfp4-fp8-4x-r39", False)):
            c.app.propose_serve(recipe, "4nodes-switch-b")
            await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen | RefusalScreen))
            assert isinstance(c.app.screen, ConfirmActionScreen) or not protected
            text = " ".join((await shown(pilot, lambda t, r=recipe: f"Serve {r} on" in t)).split())
            assert (f"{recipe} is a protected lane" in text) is protected, text
            if protected:
                assert "x (stop) and power on its nodes" in text, text
            await pilot.press("escape")
            await until(c, lambda: c.app.screen is c.app.main_screen)
