"""Issue 28 item 6, finding the incident, at 80x24: the serve confirm of a
protected lane says so before it serves (the first word of it was the
refusal at `x`)."""

from __future__ import annotations

from pathlib import Path

from sparktui.core.state import NodeState
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen

from .simconsole import shown, sim_console, until

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
