"""Issue 10/13 in the console: what is wrong with a node (core/nodehealth, the
guards' own definition) by its name and in its details; the shared switches'
plug states under the nodes and, when one is not on, in the header."""

from __future__ import annotations

from sparktui.tui.screens.info import TextScreen
from sparktui.tui.widgets.tables import NodesTable

from .harness import build, wait_for
from .screen_text import screen_text


def painted(c) -> bool:
    screen = c.app.main_screen
    table = screen.query_one(NodesTable)
    return (table.row_count == 8 and not screen._pending_nodes and bool(screen._switches)
            and all(s.probe is not None for s in c.service.snapshot().nodes))


async def test_a_node_with_a_local_hf_cache_dir_is_marked_and_detailed_at_80_columns() -> None:
    c = build()
    c.fleet.nodes["dgx7"].hf_kind = "dir"
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: painted(c))
        table = c.app.main_screen.query_one(NodesTable)
        await wait_for(pilot, lambda: str(table.get_cell("dgx7", "node")) == "dgx7 !")
        assert str(table.get_cell("dgx6", "node")) == "dgx6"
        assert str(table.get_cell("dgx7", "problem")).startswith(
            "HF cache /home/kilork/.cache/huggingface is a directory")
        await pilot.pause()
        lines = screen_text(c.app).splitlines()
        assert any(line.lstrip("│ ").startswith("dgx7 !") for line in lines)
        assert all(len(line) <= 80 for line in lines)
        table.focus()
        table.move_cursor(row=table.get_row_index("dgx7"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(c.app.screen, TextScreen))
        await pilot.pause()
        text = screen_text(c.app)
        assert "PROBLEM: dgx7: /home/kilork/.cache/huggingface is a" in text, text
        assert "(refuses a" in text and "serve, overridable)" in text


async def test_switch_states_under_the_nodes_and_an_off_switch_in_the_header() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: painted(c))
        await pilot.pause()
        text = screen_text(c.app)
        assert "sw6_mt on · sw7_fan on" in text, text
        assert "OFF" not in text
        c.power.switches["switch.sw6_mt"] = False
        c.app.read_switches()
        await wait_for(pilot, lambda: c.app.main_screen._switches.get("sw6_mt") == "off")
        await pilot.pause()
        text = screen_text(c.app)
        assert "sw6_mt OFF · sw7_fan on" in text
        assert "8/8 online · sw6_mt OFF" in text.splitlines()[0], text
