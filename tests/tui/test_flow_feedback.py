"""Issue 28 items 3 and 4: nothing silent. A key that waits on the network
says so at once; Cancel says nothing was done; the focused button reads
without colour (a ▶) and Cancel does not look chosen when it is not; escape
on a refusal reached from the cluster picker goes back to the picker."""

from __future__ import annotations

import pytest
from textual.widgets import Button

from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import PickerScreen
from sparktui.tui.widgets.alerts import NoticeLine

from .harness import wait_for
from .scenes import LANE, hold_still, incident, scene_console, select_node, settled


def notice(c) -> str:
    return str(c.app.main_screen.query_one(NoticeLine).render())


async def test_a_slow_key_says_at_once_it_is_working_and_cancel_says_nothing_was_done() -> None:
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        await hold_still(c)
        await select_node(pilot, c, "dgx7")
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen), timeout=15)
        await pilot.pause(0.1)
        # the key's own acknowledgement came first, then the preview's answer
        said = [n[2] for n in reversed(c.app.notices)]
        assert said[-2:] == ["preparing power-cycle dgx7: checking its guards…",
                             "power-cycle dgx7: checked, waiting for your confirm"], said
        cancel = c.app.screen.query_one("#cancel", Button)
        assert cancel.variant == "default"  # not drawn as the chosen one
        assert "▶" not in str(cancel.label)  # the focus is in the name field
        await pilot.press("tab")  # name field -> Cancel
        await pilot.pause(0.1)
        assert c.app.screen.focused is cancel and str(cancel.label) == "▶ Cancel"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(c.app.screen, ConfirmActionScreen))
        await pilot.pause(0.1)
        assert "power-cycle dgx7 cancelled: nothing was done" in notice(c), notice(c)


async def test_escape_on_a_refusal_from_the_cluster_picker_goes_back_to_the_picker() -> None:
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        await hold_still(c)
        c.app.pick_cluster("dsv41-flash-r37-4x-eager")
        assert "checking dsv41-flash-r37-4x-eager" in notice(c)
        await wait_for(pilot, lambda: isinstance(c.app.screen, PickerScreen), timeout=15)
        await pilot.pause(0.1)
        assert "checking" not in notice(c) and "clusters checked" in notice(c), notice(c)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(c.app.screen, RefusalScreen), timeout=15)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(c.app.screen, PickerScreen), timeout=5)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(c.app.screen, PickerScreen))
        await pilot.pause(0.1)
        assert "serve dsv41-flash-r37-4x-eager cancelled" in notice(c), notice(c)


@pytest.mark.parametrize(("key", "what"), [("R", "recover dgx6"), ("x", f"stop {LANE}")])
async def test_r_on_a_starved_node_and_x_on_a_lane_say_at_once_they_are_working(
        key: str, what: str) -> None:
    """`R` on a starved node took 5-9 s to its modal, `x` 2-5 s, the status
    line showing the previous message meanwhile: the key's own acknowledgement
    comes first (bench/bench_tui.py --ack measures how soon)."""
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        if key == "R":
            await incident(pilot, c)
            await hold_still(c)
            await select_node(pilot, c, "dgx6")
        else:
            await settled(pilot, c)
            await hold_still(c)
            await pilot.press("2")
            await wait_for(pilot, lambda: c.app.main_screen.current_pane == "lanes")
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen), timeout=15)
        await pilot.pause(0.1)
        said = [n[2] for n in reversed(c.app.notices)]
        assert said[-2:] == [f"preparing {what}: checking its guards…",
                             f"{what}: checked, waiting for your confirm"], said
