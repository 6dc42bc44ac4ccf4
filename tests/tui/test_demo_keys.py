"""Issue 13's smaller console items: `demo --list-scenarios` is the simulator's
one listing; the demo palette plays Boot D (the fit overridden, typed confirm);
Tab moves pane by pane with a visible effect at 80x24 and 160x48."""

from __future__ import annotations

import argparse

import pytest

from sparktui.cli import demo_cmd
from sparktui.sim.scenarios import SCENARIOS, scenario_listing
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.widgets.tables import LanesTable, NodesTable

from .harness import build, wait_for
from .screen_text import screen_text


def test_demo_lists_the_simulators_scenarios(capsys) -> None:
    assert demo_cmd.run(argparse.Namespace(list_scenarios=True)) == 0
    out = capsys.readouterr().out
    assert out == scenario_listing() + "\n"
    assert [line.split()[0] for line in out.splitlines()] == list(SCENARIOS)


def test_a_fast_demo_stretches_the_slow_tier_with_the_poll(shipped_config) -> None:
    """At 200x a tick is 100 simulated seconds: the slow tier (docker, the plug,
    liveness) comes as many ticks apart as configured, not on every tick."""
    c = shipped_config.console
    fast = demo_cmd.demo_console(shipped_config, 200.0)
    assert fast.poll_interval_s == demo_cmd.MIN_REAL_POLL_S * 200.0
    assert fast.slow_probe_interval_s / fast.poll_interval_s == pytest.approx(
        c.slow_probe_interval_s / c.poll_interval_s)
    assert demo_cmd.demo_console(shipped_config, None) == c  # real time: as configured


async def test_the_demo_palette_offers_boot_d_with_the_fit_overridden() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(s.probe is not None
                                          for s in c.service.snapshot().nodes))
        commands = demo_cmd.triggers(None, c.service, c.app,  # type: ignore[arg-type]
                                     "boot-d-oom")
        (name, run, _), = [cmd for cmd in commands if "Boot D" in cmd[0]]
        # dgx1-4 are protected in the shipped config: the free four play the night
        assert name == ("demo: Boot D — serve dsv41-flash-r37-4x-eager on 4nodes-switch-b, "
                        "fit overridden")
        run()
        await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen
                                                 | RefusalScreen), timeout=15)
        assert c.app.screen.preview.target == "dsv41-flash-r37-4x-eager"
        await pilot.pause(0.2)
        # the fit is overridden (the scripted fleet lacks the r37 image: that refuses);
        # the guards follow what it would have run, a page down at 80x24
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert "OVERRIDDEN fit dsv41-flash-r37-4x-eager@4nodes-switch-b" in screen_text(c.app)


async def test_tab_moves_pane_by_pane_and_shows_it() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        screen = c.app.main_screen
        assert isinstance(screen.focused, NodesTable)
        await pilot.press("tab")
        assert screen.current_pane == "lanes" and isinstance(screen.focused, LanesTable)
        assert screen.query_one("#lanes-pane").display
        assert not screen.query_one("#nodes-pane").display
        await pilot.press("shift+tab", "shift+tab")
        assert screen.current_pane == "memory"
    c = build()
    async with c.app.run_test(size=(160, 48)) as pilot:
        screen = c.app.main_screen
        await pilot.press("tab")
        await pilot.pause()
        lanes = screen.query_one("#lanes-pane")
        assert lanes.has_pseudo_class("focus-within")
        assert not screen.query_one("#nodes-pane").has_pseudo_class("focus-within")
        # the focused pane's frame is drawn in another colour than the others
        assert lanes.styles.border_top != screen.query_one("#nodes-pane").styles.border_top
