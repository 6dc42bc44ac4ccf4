"""Pilot tests of the console against the simulator: the operator's flows
from the issue, keyboard only."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktui.cli import demo_cmd
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.core.state import NodeState
from sparktui.sim.testing import connect
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import PickerScreen
from sparktui.tui.widgets.alerts import NoticeLine
from sparktui.tui.widgets.tables import LanesTable, NodesTable

from .harness import typed
from .screen_text import online_rows
from .simconsole import PACE, shown, sim_console, until

BOOT_STEP_S = 600.0
"""Steps through a boot nobody looks at (fewer repaints of the console)."""
SMALL = (80, 24)
WIDE = (160, 48)


def online(c) -> bool:
    snap = c.service.snapshot()
    return len(snap.nodes) == 8 and all(s.state is NodeState.ONLINE for s in snap.nodes)


async def select_node(pilot, c, node: str) -> None:
    table = c.app.main_screen.query_one(NodesTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(node))
    await pilot.pause()


async def test_eight_nodes_online_in_a_small_terminal(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as c, c.app.run_test(size=SMALL) as pilot:
        # a slow tier that missed its probe timeout on a loaded host leaves the
        # kernel unknown until the next one: wait for all eight to be read
        await until(c, lambda: online(c) and all(
            s.probe is not None and s.probe.kernel for s in c.service.snapshot().nodes))
        text = await shown(pilot, lambda t: online_rows(t) == 8 and "8/8 online" in t
                           and t.count("6.17.0-1031 ") == 8)
        assert online_rows(text) == 8 and "8/8 online" in text, text
        assert text.count("6.17.0-1031 ") == 8 and "BAD" not in text, text


async def pick(pilot, c, option: str) -> None:
    await until(c, lambda: isinstance(c.app.screen, PickerScreen))
    picker = c.app.screen.query_one("#picker")
    picker.highlighted = [o.id for o in picker.options].index(option)
    await pilot.press("enter")
    await until(c, lambda: not isinstance(c.app.screen, PickerScreen)
                or c.app.screen.query_one("#picker") is not picker)


async def start_lane(c, recipe: str) -> None:
    """Start a lane behind the console's back, as `sparktui serve --override fit`
    would have: the console must discover and follow it from the labels."""
    r = load_recipe(c.config, recipe)

    async def one(rank) -> None:
        async with connect(c.sim, rank.node) as conn:
            result = await conn.run(rank.command(3), timeout=30)
            assert result.exit_status == 0, result.stderr

    # together, as a launcher on the real cluster does within seconds (the
    # simulated clock stands still meanwhile)
    await asyncio.gather(*(one(rank) for rank in plan(c.config, r, r.cluster).ranks))


async def test_serve_from_the_picker_runs_to_serving_with_phases(tmp_path: Path) -> None:
    lane = "glm53-flash-eugr-2x"
    async with sim_console(tmp_path) as c, c.app.run_test(size=WIDE) as pilot:
        await until(c, lambda: online(c))
        await pilot.press("s")
        await pick(pilot, c, lane)
        await pick(pilot, c, "4nodes-switch-b")  # its own pair is production
        await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        text = await shown(pilot, lambda t: f"Serve {lane} on" in t)
        assert f"Serve {lane} on 4nodes-switch-b" in text
        assert c.app.screen.focused is c.app.screen.query_one("#cancel")  # plain confirm
        await pilot.press("f2")  # the exact commands behind the details toggle
        assert f"docker run -d --name sparktui-{lane}-r0" in await shown(
            pilot, lambda t: "docker run" in t)
        preview = c.app.screen.preview
        assert {v.guard for v in preview.report.verdicts} >= {"fit", "blocking-switch",
                                                              "protected-node", "hf-cache"}
        assert preview.report.allowed
        await pilot.press("tab", "enter")  # Cancel is focused; tab to Confirm
        lanes = c.app.main_screen.query_one(LanesTable)
        seen: set[str] = set()

        def phase() -> str:
            if lanes.row_count == 0:
                return ""
            p = str(lanes.get_cell(lane, "phase"))
            seen.add(p)
            return p

        # (once serving, the cell shows the quality gate the serve runs); steps
        # short enough that its 23.5 GiB/rank load is seen, then coarse
        serving = ("serving", "qualifying", "qualified")
        await until(c, lambda: phase() == "loading weights" or phase() in serving,
                    step=10.0, why=lambda: f"phases seen {seen}")
        await until(c, lambda: phase() in serving, step=BOOT_STEP_S,
                    why=lambda: f"phases seen {seen}")
        assert "loading weights" in seen
        await until(c, lambda: any("serve" in str(n[2]) and "serving" in
                                   str(n[2]) for n in c.app.notices))
        assert "rank 0 on dgx5" in await shown(pilot, lambda t: "rank 0 on" in t)
        await until(c, lambda: str(lanes.get_cell(lane, "health")) == "ok")
        assert str(lanes.get_cell(lane, "kv")) != "—"  # KV pool tokens from the boot log


async def test_power_cycle_drives_home_assistant_and_the_node_returns(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as c, c.app.run_test(size=WIDE) as pilot:
        await until(c, lambda: online(c))
        await select_node(pilot, c, "dgx6")
        await pilot.press("P")
        await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        await typed(pilot, *"dgx6")
        await pilot.press("enter")
        await until(c, lambda: any("power-cycle dgx6" in str(n[2]) and n[1] == "done"
                                   for n in c.app.notices),
                    why=lambda: str([n[2] for n in c.app.notices]))
        assert c.sim.ha.calls == [("turn_off", "switch.dgx6"), ("turn_on", "switch.dgx6")]
        assert c.sim.nodes["dgx6"].up
        assert not c.service.unfinished()


async def test_protected_node_is_refused_in_the_modal(tmp_path: Path) -> None:
    async with sim_console(tmp_path) as c, c.app.run_test(size=SMALL) as pilot:
        await until(c, lambda: online(c))
        await select_node(pilot, c, "dgx2")
        await pilot.press("P")
        await until(c, lambda: isinstance(c.app.screen, RefusalScreen))
        assert "dgx2 is a protected node" in await shown(pilot, lambda t: "protected" in t)
        assert not c.sim.ha.calls


async def fire_the_demo_prompt(pilot, c, lane: str) -> None:
    """The demo palette's 150K prompt, as the operator reproduces the incident: the
    prompt-length guard refuses it (the lane's envelope is unmeasured), ``o``
    overrides it, the lane's name typed; then it is sent."""
    (run,) = [cmd[1] for cmd in demo_cmd.triggers(c.sim, c.service, c.app, "long-prompt")
              if cmd[0] == f"demo: send the 150K prompt to {lane}"]
    run()
    await until(c, lambda: isinstance(c.app.screen, RefusalScreen))
    assert {v.guard for v in c.app.screen.preview.refusals} == {"prompt-length"}
    assert not any(r.prompt_tokens == 150_000 for r in c.sim.lane_rank0(lane).requests)
    await pilot.press("o")
    await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen))
    assert c.app.screen.preview.confirmation.typed
    await typed(pilot, *lane)
    await pilot.press("enter")
    await until(c, lambda: any(r.prompt_tokens == 150_000
                               for r in c.sim.lane_rank0(lane).requests))


async def test_long_prompt_raises_the_thrash_alert_with_evidence(tmp_path: Path) -> None:
    lane = "glm53-mxfp4-fp8-4x-r39-196k"
    async with sim_console(tmp_path, "long-prompt") as c, \
            c.app.run_test(size=WIDE) as pilot:
        await until(c, lambda: online(c))
        await start_lane(c, lane)
        lanes = c.app.main_screen.query_one(LanesTable)
        await until(c, lambda: lanes.row_count and str(lanes.get_cell(lane, "phase"))
                    == "serving", max_sim_s=4 * 3600, step=BOOT_STEP_S)
        await fire_the_demo_prompt(pilot, c, lane)
        book = c.app.alerts
        def thrashing() -> set[str]:
            return {e.alert.subject for e in book.active.values() if e.alert.level == "thrash"}

        # a hung node's probe fails after probe_timeout_s real seconds: paced
        await until(c, lambda: {"dgx6", "dgx7"} <= thrashing()
                    and f"fatal:{lane}" in book.active, pace=PACE,
                    why=lambda: str({k: e.alert.level for k, e in book.active.items()}))
        text = await shown(pilot, lambda t: "next:" in t)
        assert "next:" in text
        alert = book.active["thrash:dgx6"].alert
        assert alert.evidence and alert.next_step
        assert any("ping answers, SSH probe failed" in e for e in alert.evidence)
        fatal = book.active[f"fatal:{lane}"].alert
        assert "fatal error" in fatal.evidence[0] or "timed out" in fatal.evidence[0]


async def test_read_only_console_offers_no_actions(tmp_path: Path) -> None:
    async with sim_console(tmp_path, read_only=True) as c, \
            c.app.run_test(size=WIDE) as pilot:
        await until(c, lambda: online(c))
        await select_node(pilot, c, "dgx6")
        for key in ("P", "R", "s", "x"):
            c.app.main_screen.query_one(NoticeLine).update("")
            await pilot.press(key)
            # one line says why, and how to get a writable one
            text = await shown(pilot, lambda t: "read-only" in t)
            assert c.app.screen is c.app.main_screen
            assert "read-only" in text and "without --read-only" in text
        assert not c.sim.ha.calls


async def test_fit_refusal_is_overridden_from_the_console_with_the_name_typed(
        tmp_path: Path) -> None:
    lane = "glm53-mxfp4-fp8-4x-r39-196k"
    async with sim_console(tmp_path, "long-prompt") as c, \
            c.app.run_test(size=SMALL) as pilot:
        await until(c, lambda: online(c))
        c.app.propose_serve(lane)
        await until(c, lambda: isinstance(c.app.screen, RefusalScreen))
        await pilot.pause(0.1)
        refusal = c.app.screen
        assert {v.guard for v in refusal.preview.refusals} == {"fit"}
        assert "o: override fit" in await shown(pilot, lambda t: "override" in t)
        await pilot.press("o")
        await until(c, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        await pilot.pause(0.1)
        modal = c.app.screen
        assert modal.preview.report.overridden and modal.preview.confirmation.typed
        assert "OVERRIDDEN" in await shown(pilot, lambda t: "OVERRIDDEN" in t)
        await typed(pilot, *lane)
        await pilot.press("enter")
        await until(c, lambda: not isinstance(c.app.screen, ConfirmActionScreen))
        journal = (c.config.state_dir() / "journal.jsonl")
        await until(c, lambda: journal.exists() and '"override"' in journal.read_text()
                    and '"fit"' in journal.read_text(),
                    why=lambda: journal.read_text() if journal.exists() else "")
