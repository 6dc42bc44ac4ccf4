"""The envelope and the bench from the console (issue 29): a serving lane's palette
offers both, each in the confirm modal as the CLI plans it (the ladder's rungs,
the bench's cells); the lane's details show its longest safe prompt, measured
or not (read from the recipe when shown: an envelope run since writes it)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from sparktui.ops.recipe_record import record
from sparktui.tui import commands
from sparktui.tui.screens.confirm import ConfirmActionScreen
from sparktui.tui.screens.info import TextScreen
from sparktui.tui.widgets.tables import LanesTable

from .simconsole import ROOT, shown, sim_config, sim_console, until
from .test_console_sim import BOOT_STEP_S, WIDE, online, start_lane

LANE = "glm53-mxfp4-fp8-4x-r39"


def palette(c) -> dict[str, object]:
    provider = commands.ActionCommands(c.app.screen)
    return {name: run for name, run, _ in provider._commands()}


async def test_a_serving_lane_offers_envelope_and_bench_and_shows_its_ceiling(
        tmp_path: Path) -> None:
    # the details read the recipe that is written below: a copy, never the shipped one
    shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    config = dataclasses.replace(sim_config(tmp_path), recipes_dir=tmp_path / "recipes")
    async with sim_console(tmp_path, config=config) as c, \
            c.app.run_test(size=WIDE) as pilot:
        await until(c, lambda: online(c))
        await start_lane(c, LANE)
        lanes = c.app.main_screen.query_one(LanesTable)
        await until(c, lambda: lanes.row_count and str(lanes.get_cell(LANE, "phase"))
                    == "serving", max_sim_s=4 * 3600, step=BOOT_STEP_S)
        entries = palette(c)
        entries[f"envelope {LANE}"]()
        await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        modal = c.app.screen
        assert modal.preview.kind == "envelope" and modal.preview.target == LANE
        assert [s.step for s in modal.preview.steps][:2] == ["envelope rung 8K",
                                                             "envelope rung 32K"]
        await pilot.press("escape")
        await until(c, lambda: not isinstance(c.app.screen, ConfirmActionScreen))
        entries[f"bench {LANE}"]()
        await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        assert c.app.screen.preview.kind == "bench"
        await pilot.press("escape")
        await until(c, lambda: not isinstance(c.app.screen, ConfirmActionScreen))

        async def details() -> str:
            lanes.focus()
            lanes.move_cursor(row=lanes.get_row_index(LANE))
            await pilot.press("enter")
            await until(c, lambda: isinstance(c.app.screen, TextScreen))
            text = await shown(pilot, lambda t: "longest prompt" in t)
            await pilot.press("escape")
            await until(c, lambda: not isinstance(c.app.screen, TextScreen))
            return text

        assert "not measured: prompts over 8,192 tokens are refused" in await details()
        assert c.config.recipes_dir == tmp_path / "recipes"
        record(c.config, LANE, {"fit.prefill_ceiling_tokens": 140_000}, note="test")
        assert "140,000 tokens (measured by sparktui envelope)" in await details()
