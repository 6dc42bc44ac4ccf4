"""Issue 28 item 5: the boot log's rank picker at 80x24 offers every rank of
the lane, those on a dark node too (its rank leaves the lane's listing when
the node stops answering; its last recorded lines are what an operator wants
to read), and choosing one shows those lines."""

from __future__ import annotations

from sparktui.tui.screens.info import PickerScreen
from sparktui.tui.widgets.bootlog import BootLog

from .fakecluster import add_lane
from .harness import build, wait_for
from .screen_text import screen_text

LANE = "glm53-flash-eugr-2x"


async def test_the_rank_picker_offers_a_dark_nodes_rank_and_its_last_lines() -> None:
    c = build()
    ranks = add_lane(c.fleet, LANE, "2nodes-dac", ["dgx5", "dgx6"])
    ranks[0].log.put_nowait("2026-11-29T22:40:00.000000000Z rank-zero-marker line")
    ranks[1].log.put_nowait("2026-11-29T22:40:01.000000000Z rank-one-last-words line")
    async with c.app.run_test(size=(80, 24)) as pilot:
        screen = c.app.main_screen
        await wait_for(pilot, lambda: LANE in c.service.lanes()
                       and len(c.service.lanes()[LANE].ranks) == 2, timeout=10)
        await wait_for(pilot, lambda: c.service.log_tail(LANE, 1)[0] != [], timeout=10)
        c.fleet.nodes["dgx6"].powered = False
        await wait_for(pilot, lambda: [r.rank for r in c.service.lanes()[LANE].ranks] == [0]
                       and [r.rank for r in screen._lanes[LANE].ranks] == [0], timeout=15)
        await pilot.press("3", "r")
        await wait_for(pilot, lambda: isinstance(c.app.screen, PickerScreen))
        await pilot.pause(0.1)
        text = screen_text(c.app)
        assert "rank 0 on dgx5" in text, text
        assert "rank 1 on dgx6: " in text and "its last recorded lines" in text, text
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: screen.rank == 1)
        log = screen.query_one(BootLog)
        await wait_for(pilot, lambda: log.row_count >= 1)
        assert "rank-one-last-words" in screen_text(c.app), screen_text(c.app)
