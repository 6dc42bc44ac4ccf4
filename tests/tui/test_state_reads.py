"""Issue 28 item 7, state that reads wrong, at 80x24: a read-only console
does not offer a key it refuses (the empty Lanes pane said "s serves a recipe");
a pane hidden at 80x24 is current once the terminal widens; a protected node's
details say why it is protected; a boot log key where the log does not show
says what it did."""

from __future__ import annotations

import dataclasses

import pytest

from sparktui.service.events import LaneChanged
from sparktui.tui.alertbook import CLUSTER_LOST
from sparktui.tui.details import node_details
from sparktui.tui.messages import ServiceReported
from sparktui.tui.screens.info import TextScreen
from sparktui.tui.widgets.alerts import NoticeLine
from sparktui.tui.widgets.tables import LanesTable, NodesTable

from .harness import build, wait_for
from .scenes import LANE, scene_console, settled
from .screen_text import screen_text


@pytest.mark.parametrize("read_only", [False, True])
async def test_the_empty_lanes_pane_offers_s_only_where_s_serves(read_only: bool) -> None:
    c = build(read_only=read_only)
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: c.app.main_screen.current_pane == "lanes")
        await pilot.pause()
        text = screen_text(c.app)
        assert "no lane yet" in text, text
        assert ("s serves a recipe" in text) is not read_only, text
        if read_only:
            assert "read-only: a writable console serves one" in text, text


async def test_every_node_silent_after_answering_is_one_alert_that_clears() -> None:
    """A read-only console whose simulator went away showed eight `unknown 44s`
    rows and no alert. Every node unknown or unreachable after one answered is
    one alert (the console's way to the nodes is what is gone); it clears when
    a node answers again."""
    c = build(read_only=True)
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(s.state.value == "online"
                                          for s in c.service.snapshot().nodes), timeout=10)
        assert CLUSTER_LOST not in c.app.alerts.active
        for node in c.fleet.nodes.values():
            node.responsive = node.pings = False
        await wait_for(pilot, lambda: CLUSTER_LOST in c.app.alerts.active, timeout=20)
        await pilot.pause(0.1)
        alert_row = screen_text(c.app).splitlines()[1]
        assert "UNRESPONSIVE" in alert_row and "cluster" in alert_row, alert_row
        assert "no node has answered since" in alert_row, alert_row
        c.fleet.nodes["dgx5"].responsive = c.fleet.nodes["dgx5"].pings = True
        await wait_for(pilot, lambda: CLUSTER_LOST not in c.app.alerts.active, timeout=20)
        assert [e.alert.key for e in c.app.alerts.cleared] == [CLUSTER_LOST]
        assert "UNRESPONSIVE" not in screen_text(c.app).splitlines()[1]


async def test_a_pane_the_compact_layout_hid_is_current_once_the_terminal_widens() -> None:
    """The README's incident at 160x48, taken after the 80x24 one, showed the
    lane 'loading weights' in the Lanes pane beside its FAILED boot log: what
    arrived while the pane was hidden waited for a pane key, not the resize."""
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        screen = c.app.main_screen
        assert screen.current_pane == "nodes"
        view = dataclasses.replace(screen._lanes[LANE], phase="failed", load=None,
                                   progress=None, progress_text="")
        screen.post_message(ServiceReported(LaneChanged(view)))
        await wait_for(pilot, lambda: screen._lanes[LANE].phase == "failed")
        await pilot.resize_terminal(160, 48)
        lanes = screen.query_one(LanesTable)
        await wait_for(pilot, lambda: str(lanes.get_cell(LANE, "phase")) == "FAILED")
        assert "FAILED" in screen_text(c.app)


async def test_a_protected_nodes_details_say_why_it_is_protected() -> None:
    """Enter on dgx2 said `role: prod (protected)` and nothing of what that
    means; only a refusal said it, once the operator had tried."""
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(s.probe is not None
                                          for s in c.service.snapshot().nodes), timeout=20)
        table = c.app.main_screen.query_one(NodesTable)
        table.focus()
        table.move_cursor(row=table.get_row_index("dgx2"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(c.app.screen, TextScreen))
        await pilot.pause()
        text = screen_text(c.app)
        assert "role: prod (protected)" in text, text
        assert "protected: dgx2 is a protected node ([guards]" in text, text
        said = node_details(c.config, "dgx2", c.service.snapshot().get("dgx2"), None).plain
        assert ("dgx2 is a protected node ([guards] protected_nodes: dgx1, dgx2, dgx3, dgx4): "
                "no serve, stop, power cycle, power on/off or recover on it from the console"
                in " ".join(said.split())), said


async def test_a_boot_log_key_pressed_where_the_log_does_not_show_says_what_it_did() -> None:
    """f, l, w and h on the Nodes pane at 80x24 changed the hidden log's view
    and nothing on screen said so (bench_tui's key-to-paint found no frame)."""
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        line = c.app.main_screen.query_one(NoticeLine)
        for key, said in (("f", "boot log [PAUSED · level all"),
                          ("l", "level warn+"), ("w", "· wrap")):
            await pilot.press(key)
            await pilot.pause()
            text = str(line.render())
            assert said in text and "(3 shows it)" in text, text
        await pilot.press("3")
        await pilot.pause()
        before = str(line.render())
        await pilot.press("f")  # where the log shows, its banner says it
        await pilot.pause()
        assert str(line.render()) == before
        assert "[following · level warn+" in screen_text(c.app)


async def test_a_failed_lanes_progress_cell_says_why_not_its_old_gate_verdict() -> None:
    """The incident's Lanes row read `FAILED  PASSED (RU 293-word text clean, E…`:
    the gate's verdict from before the lane died, not what killed it."""
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        screen = c.app.main_screen
        view = dataclasses.replace(
            screen._lanes[LANE], phase="failed", load=None, progress=None, progress_text="",
            gate="qualified", gate_text="quality gate: PASSED (RU 293-word text clean, EN ok)",
            failure="rank 0: EngineCore encountered a fatal error. (cause: TimeoutError: RPC "
                    "call to sample_tokens timed out.)",
            failure_brief="rank 0: RPC call to sample_tokens timed out.")
        screen.post_message(ServiceReported(LaneChanged(view)))
        await pilot.press("2")
        lanes = screen.query_one(LanesTable)
        await wait_for(pilot, lambda: str(lanes.get_cell(LANE, "phase")) == "FAILED")
        await pilot.pause()
        # cut in the middle: the error's verdict is its end
        assert str(lanes.get_cell(LANE, "progress")) == "rank 0: RPC call to sa… timed out."
        row = next(line for line in screen_text(c.app).splitlines() if "FAILED" in line)
        assert "rank 0: RPC call to sa… timed out." in row and "PASSED" not in row, row
