"""Issue 14 in the console: the quality gate's verdict in the lane's row, its
banner and details, run with `g` on a serving lane; predicted OOMs in the
lanes and memory panes. The real service over the scripted fleet (frozen clock)."""

from __future__ import annotations

from sparktui.ops.events import StepProgressed, WorkflowFinished, WorkflowStarted
from sparktui.service.events import Alert, AlertRaised
from sparktui.tui.messages import ServiceReported
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import TextScreen
from sparktui.tui.widgets.tables import LanesTable

from .fakecluster import add_lane, vllm_boot_lines
from .harness import build, wait_for
from .scenes import GARBLED, LANE, PREDICTION, settled
from .screen_text import screen_text

FLASH = "glm53-flash-eugr-2x"



def serving(c, lane: str = FLASH) -> bool:
    table = c.app.main_screen.query_one(LanesTable)
    return table.row_count == 1 and str(table.get_cell(lane, "phase")) == "serving"


async def test_g_proposes_the_qualify_plan_and_the_row_shows_the_verdict_with_the_worst_span(
        ) -> None:
    c = build()
    ranks = add_lane(c.fleet, FLASH, "2nodes-dac", ["dgx5", "dgx6"])
    async with c.app.run_test(size=(80, 24)) as pilot:
        for line in vllm_boot_lines(shards=2):
            ranks[0].log.put_nowait(line)
        await pilot.press("2")
        await wait_for(pilot, lambda: serving(c))
        await pilot.press("g")  # the Qualify workflow's plan, as `sparktui qualify` previews it
        await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen
                                                 | RefusalScreen), timeout=15)
        assert c.app.screen.preview.target == FLASH
        assert f"Qualify lane {FLASH}" in screen_text(c.app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: c.app.screen is c.app.main_screen)
        # what ops/workflows/qualify emits for a garbled lane (its own tests run it)
        emit = c.service._ctx().emit
        t = c.service.clock.time()
        emit(WorkflowStarted("wf-q", t, "qualify", FLASH, ("copy",)))
        emit(StepProgressed("wf-q", t, "qualify", FLASH, f"{FLASH}: qualifying"))
        lanes = c.app.main_screen.query_one(LanesTable)
        await wait_for(pilot, lambda: str(lanes.get_cell(FLASH, "phase")) == "qualifying")
        detail = {"lane": FLASH, "qualify": {"state": "garbled", "summary": GARBLED,
                                             "reasons": ["CER 1.52 % > 0.50 %"]}}
        emit(WorkflowFinished("wf-q", t, "qualify", FLASH, False, f"{FLASH}: {GARBLED}", detail))
        await wait_for(pilot, lambda: str(lanes.get_cell(FLASH, "phase")) == "GARBLED")
        assert str(lanes.get_cell(FLASH, "progress")) == \
            "\u00abмаштабировать\u00bb for \u00abмасштабирова…"
        await pilot.pause()
        text = screen_text(c.app)
        assert "GARBLED" in text and "\u00abмаштабировать\u00bb" in text, text
        assert "garbled" in c.app.alerts.active[f"gate:{FLASH}"].alert.level
        await pilot.press("enter")  # the lane's details: the whole verdict
        await wait_for(pilot, lambda: isinstance(c.app.screen, TextScreen))
        await pilot.pause()
        assert "gate: quality gate: GARBLED" in " ".join(screen_text(c.app).split())


async def test_g_on_a_loading_lane_is_refused_and_read_only_explains() -> None:
    c = build(read_only=True)
    add_lane(c.fleet, FLASH, "2nodes-dac", ["dgx5", "dgx6"])
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2", "g")
        await pilot.pause()
        assert "qualify is not offered: this console is read-only" in " ".join(
            screen_text(c.app).split())
    c = build()
    ranks = add_lane(c.fleet, FLASH, "2nodes-dac", ["dgx5", "dgx6"])
    async with c.app.run_test(size=(80, 24)) as pilot:
        for line in vllm_boot_lines(shards=4, upto="loading"):
            ranks[0].log.put_nowait(line)
        lanes = c.app.main_screen.query_one(LanesTable)
        await pilot.press("2")
        await wait_for(pilot, lambda: lanes.row_count == 1 and "loading" in str(
            lanes.get_cell(FLASH, "phase")))
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(c.app.screen, RefusalScreen), timeout=15)
        assert c.app.screen.preview.target == FLASH


async def test_a_predicted_oom_shows_in_the_lanes_and_memory_panes() -> None:
    from .scenes import scene_console

    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        alert = Alert("predicted oom:dgx6", "predicted oom", "dgx6", (PREDICTION,),
                      f"stop the lane now (`sparktui stop {LANE}`) before the node thrashes")
        c.app.main_screen.post_message(ServiceReported(AlertRaised(alert)))
        lanes = c.app.main_screen.query_one(LanesTable)
        await pilot.press("2")
        await wait_for(pilot, lambda: "OOM dgx6" in str(lanes.get_cell(LANE, "progress")))
        await pilot.pause()
        text = screen_text(c.app)
        assert "! dgx6 runs out at shard 7/8 in ~6 min" in text, text
        await pilot.press("4")
        await pilot.pause(0.2)
        text = screen_text(c.app)
        assert "OOM predicted" in text and "! dgx6 runs out at shard 7/8" in text, text
        # the alert line carries it too, with the next step in the list
        assert "PREDICTED OOM" in text.upper()

