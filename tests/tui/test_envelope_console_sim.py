"""The envelope and the bench from the console (issue 29): a serving lane's palette
offers both, each in the confirm modal as the CLI plans it (the ladder's rungs,
the bench's cells); the lane's details show its longest safe prompt, measured
or not (read from the recipe when shown: an envelope run since writes it).
After a boot the console ran, the palette offers to record what it measured
into the recipe (the operator's yes in the confirm; comments kept)."""

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


def own_recipes(tmp_path: Path):
    """The console's config on a copy of the recipes (these tests write into them,
    never into the shipped ones)."""
    shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    return dataclasses.replace(sim_config(tmp_path), recipes_dir=tmp_path / "recipes")


def palette(c) -> dict[str, object]:
    provider = commands.ActionCommands(c.app.screen)
    return {name: run for name, run, _ in provider._commands()}


async def test_a_serving_lane_offers_envelope_and_bench_and_shows_its_ceiling(
        tmp_path: Path) -> None:
    async with sim_console(tmp_path, config=own_recipes(tmp_path)) as c, \
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


async def test_after_a_boot_the_console_offers_to_record_what_it_measured(
        tmp_path: Path) -> None:
    lane, cluster = "glm53-flash-eugr-2x", "4nodes-switch-b"
    path = tmp_path / "recipes" / lane / "recipe.toml"
    async with sim_console(tmp_path, config=own_recipes(tmp_path)) as c, \
            c.app.run_test(size=WIDE) as pilot:
        await until(c, lambda: online(c))
        before = path.read_text()
        assert not [n for n in palette(c) if n.startswith("record ")]
        c.app.propose_serve(lane, cluster)
        await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        await pilot.press("tab", "enter")
        await until(c, lambda: lane in c.app.record_offers, max_sim_s=4 * 3600, step=60.0,
                    why=lambda: str([n[2] for n in c.app.notices]))
        boot = c.app.record_offers[lane]
        assert boot.kv_bytes_per_token and boot.weights_per_rank_gib
        assert path.read_text() == before  # offered, not written
        palette(c)[f"record {lane}'s boot figures"]()
        await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        modal = c.app.screen
        assert modal.preview.kind == "record" and not modal.preview.confirmation.typed
        assert "model.kv_bytes_per_token" in modal.preview.steps[0].action
        await pilot.press("tab", "enter")
        await until(c, lambda: "measured at boot" in path.read_text(),
                    why=lambda: str([n[2] for n in c.app.notices]))
        # recorded: no longer offered
        await until(c, lambda: lane not in c.app.record_offers)
        assert f"record {lane}'s boot figures" not in palette(c)
    text = path.read_text()
    assert f"# measured at boot {boot.boot}" in text
    assert [ln for ln in before.splitlines() if ln.lstrip().startswith("#")] == \
        [ln for ln in text.splitlines()
         if ln.lstrip().startswith("#") and "measured at boot" not in ln]
