"""Pilot tests: the console on the real service over the scripted fleet."""

from __future__ import annotations

from textual.widgets import Button, Input

from sparktui.core.state import NodeState
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import HelpScreen, PickerScreen
from sparktui.tui.widgets.bootlog import BootLog
from sparktui.tui.widgets.tables import LanesTable, NodesTable

from .fakecluster import GIB_KIB, add_lane, vllm_boot_lines
from .harness import build, typed, wait_for
from .screen_text import online_rows, screen_text

WIDE = (160, 48)
SMALL = (80, 24)


def all_polled(c) -> bool:
    snap = c.service.snapshot()
    return bool(snap.nodes) and all(s.state is not NodeState.UNKNOWN for s in snap.nodes)


def nodes_painted(c) -> bool:
    table = c.app.main_screen.query_one(NodesTable)
    return all_polled(c) and not c.app.main_screen._pending_nodes and table.row_count == 8


async def select_node(pilot, c, node: str) -> None:
    table = c.app.main_screen.query_one(NodesTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(node))
    await pilot.pause()


async def test_nodes_pane_shows_eight_nodes_online():
    c = build()
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await pilot.pause()
        table = c.app.main_screen.query_one(NodesTable)
        states = [str(table.get_cell(n, "state")) for n in c.config.nodes]
        assert states == ["online"] * 8
        text = screen_text(c.app)
        assert online_rows(text) == 8 and "8/8 online" in text
        assert "prod*" in text and "6.17.0-1031 " in text and "BAD" not in text


async def test_power_cycle_needs_typed_name_and_shows_ha_entity():
    c = build()
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await select_node(pilot, c, "dgx6")
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        modal = c.app.screen
        text = screen_text(c.app)
        assert "switch.dgx6" in text and "turn_off" not in text  # summary first
        # a node that answers is shut down before its plug is cut (graceful, issue 15)
        assert " 2. poweroff [dgx6]" in text and " 4. plug off [switch.dgx6]" in text
        await pilot.press("f2")  # the exact calls behind the details toggle
        await wait_for(pilot, lambda: "protected-node dgx6" in screen_text(c.app))
        text = screen_text(c.app)
        assert "turn_off" in text and "turn_on" in text
        assert "wait 35 s" in text
        assert "PASS" in text and "REFUSE" not in text
        assert "protected-node dgx6" in text
        confirm = modal.query_one("#confirm", Button)
        assert confirm.disabled
        box = modal.query_one("#typed", Input)
        assert modal.focused is box  # typing goes straight into the name field
        await typed(pilot, *"dgx5")
        assert confirm.disabled  # the wrong node's name does not unlock it
        await pilot.press("enter")  # ...and Enter with it says so, and stays
        assert c.app.screen is modal
        assert "'dgx5' is not dgx6" in screen_text(c.app)
        assert not c.power.calls
        box.value = ""
        await typed(pilot, *"dgx6")
        assert not confirm.disabled
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(c.app.screen, ConfirmActionScreen))
        # the workflow runs in the background: its step shows in the Lanes pane; the
        # scripted node never goes dark, so its plug is never cut
        await wait_for(pilot, lambda: "power-cycle dgx6: wait dark" in screen_text(c.app))
        assert c.power.calls == []


async def test_typed_confirm_enter_without_the_name_says_so_and_escape_cancels():
    c = build()
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await select_node(pilot, c, "dgx7")
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        await pilot.press("enter")  # nothing typed: it says what to type, and stays
        assert isinstance(c.app.screen, ConfirmActionScreen)
        assert "type dgx7 first" in screen_text(c.app)
        await typed(pilot, *"dgx7")
        await pilot.press("escape")  # escape cancels even with the name typed
        await wait_for(pilot, lambda: not isinstance(c.app.screen, ConfirmActionScreen))
        await pilot.pause(0.1)
        assert not [w for w in c.app.workers if w.group == "actions"]
        assert not c.power.calls


async def test_protected_node_power_cycle_is_refused_with_reasons():
    c = build()
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await select_node(pilot, c, "dgx1")
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(c.app.screen, RefusalScreen))
        text = screen_text(c.app)
        assert "REFUSED" in text and "dgx1 is a protected node" in text
        assert "dgx1, dgx2, dgx3, dgx4" in text
        assert not c.app.screen.query("#confirm")


async def test_thrash_raises_alert_with_evidence_and_next_step():
    c = build()
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        node = c.fleet.nodes["dgx6"]
        node.avail_kib = int(1.5 * GIB_KIB)
        node.psi_some, node.psi_full = 55.0, 35.0
        node.journal.put_nowait("2026-11-29T22:45:01.000000+0000 dgx6 kernel: NVRM: "
                                "nvCheckOkFailedNoLog: Check failed: Out of memory "
                                "[NV_ERR_NO_MEMORY] (0x00000051) returned from "
                                "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359")
        book = c.app.alerts
        await wait_for(pilot, lambda: "thrash:dgx6" in book.active, timeout=8)
        assert book.active["thrash:dgx6"].alert.level == "thrash suspected"
        node.responsive = False  # ping answers, sshd starved
        await wait_for(pilot, lambda: book.active["thrash:dgx6"].alert.level == "thrash", timeout=8)
        await pilot.pause()
        text = screen_text(c.app)
        assert "THRASH" in text and "dgx6" in text
        assert "MemAvailable 1.5 GiB" in text
        assert "next:" in text
        table = c.app.main_screen.query_one(NodesTable)
        await wait_for(pilot, lambda: str(table.get_cell("dgx6", "state")) == "STARVED")


async def test_lane_boot_shows_phases_progress_and_banner():
    c = build()
    ranks = add_lane(c.fleet, "glm53-flash-eugr-2x", "2nodes-dac", ["dgx5", "dgx6"])
    lines = vllm_boot_lines(shards=4)
    loading, rest = lines[:4], lines[4:]
    async with c.app.run_test(size=WIDE) as pilot:
        for line in loading:
            ranks[0].log.put_nowait(line)
        lanes = c.app.main_screen.query_one(LanesTable)
        await wait_for(pilot, lambda: lanes.row_count == 1 and "loading" in str(
            lanes.get_cell("glm53-flash-eugr-2x", "phase")))
        await pilot.pause()
        progress = str(lanes.get_cell("glm53-flash-eugr-2x", "progress"))
        assert progress.startswith("2/4 50% ETA ")  # shards done/total, percent, ETA
        assert "LOADING WEIGHTS" in screen_text(c.app)
        for line in rest:
            ranks[0].log.put_nowait(line)
        await wait_for(pilot, lambda: str(lanes.get_cell("glm53-flash-eugr-2x", "phase"))
                       == "serving")
        await pilot.pause()
        text = screen_text(c.app)
        # KV and concurrency sit right of the priority columns (and in the details)
        assert str(lanes.get_cell("glm53-flash-eugr-2x", "kv")) == "2,621,440"
        assert str(lanes.get_cell("glm53-flash-eugr-2x", "conc")) == "10.00x"
        assert "SERVING" in text and "rank 0 on dgx5" in text
        log = c.app.main_screen.query_one(BootLog)
        assert log.row_count == len(lines)  # every line once, no duplicates


async def test_fatal_line_alerts_and_is_marked_in_the_log():
    c = build()
    ranks = add_lane(c.fleet, "glm53-mxfp4-fp8-4x-r39", "4nodes-switch-b",
                     ["dgx5", "dgx6", "dgx7", "dgx8"])
    async with c.app.run_test(size=WIDE) as pilot:
        for line in vllm_boot_lines(shards=2):
            ranks[0].log.put_nowait(line)
        ranks[0].log.put_nowait("2026-11-29T22:50:00.000000000Z (EngineCore_DP0 pid=312) "
                                "ERROR 11-29 22:50:00 [core.py:900] TimeoutError: RPC call to "
                                "sample_tokens timed out.")
        book = c.app.alerts
        await wait_for(pilot, lambda: "fatal:glm53-mxfp4-fp8-4x-r39" in book.active)
        await pilot.pause()
        text = screen_text(c.app)
        assert "FATAL" in text and "RPC call to sample_tokens timed out" in text
        assert "r0  ! " in text  # the fatal line is marked in words, not only colour


async def test_boot_log_follow_search_filter_and_rank():
    c = build()
    ranks = add_lane(c.fleet, "glm53-flash-eugr-2x", "2nodes-dac", ["dgx5", "dgx6"])
    for line in vllm_boot_lines(shards=4):
        ranks[0].log.put_nowait(line)
    ranks[1].log.put_nowait("2026-11-29T22:40:00.000000000Z rank-one-marker line")
    async with c.app.run_test(size=WIDE) as pilot:
        log = c.app.main_screen.query_one(BootLog)
        await wait_for(pilot, lambda: log.row_count >= 10)
        await pilot.press("f")
        assert not log.follow
        await pilot.press("f")
        assert log.follow
        await pilot.press("slash")
        await typed(pilot, *"KV cache size")
        await pilot.press("enter")
        assert log.search == "KV cache size" and not log.follow
        first = log.match_row
        assert first is not None and "KV cache size" in log._rows[first][0].text
        assert "r0  ·>" in screen_text(c.app)
        await pilot.press("n")  # one match only: next wraps to the same row
        assert log.match_row == first
        await pilot.press("t")
        await typed(pilot, *"safetensors")
        await pilot.press("enter")
        assert log.row_count == 4
        await pilot.press("t")
        c.app.main_screen.query_one("#log-input", Input).value = ""
        await pilot.press("enter")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(c.app.screen, PickerScreen))
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: c.app.main_screen.rank == 1)
        await wait_for(pilot, lambda: log.row_count == 1)
        assert "rank-one-marker" in screen_text(c.app)


async def test_read_only_has_no_action_keys():
    c = build(read_only=True)
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await pilot.pause()
        footer = screen_text(c.app).splitlines()[-1]
        assert "Power" not in footer and "Serve" not in footer and "Stop" not in footer
        assert "Search" in footer
        await select_node(pilot, c, "dgx6")
        for key in ("P", "R", "s", "x"):
            await pilot.press(key)
            await pilot.pause()
            assert c.app.screen is c.app.main_screen
            assert "this console is read-only" in screen_text(c.app)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(c.app.screen, HelpScreen))
        text = screen_text(c.app)
        assert "read-only" in text and "Power-cycle" not in text


async def test_small_terminal_shows_one_pane_at_a_time():
    c = build()
    async with c.app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await pilot.pause()
        screen = c.app.main_screen
        shown = [p for p in ("nodes", "lanes", "bootlog", "memory")
                 if screen.query_one(f"#{p}-pane").display]
        assert shown == ["nodes"]
        text = screen_text(c.app)
        assert "1 Nodes" in text and "4 Memory" in text
        assert online_rows(text) == 8 and "8/8 online" in text
        await pilot.press("4")
        await pilot.pause()
        shown = [p for p in ("nodes", "lanes", "bootlog", "memory")
                 if screen.query_one(f"#{p}-pane").display]
        assert shown == ["memory"]
        assert "MemAvailable" in screen_text(c.app)


async def test_updates_under_a_modal_are_kept_and_painted_after():
    c = build()
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(c.app.screen, HelpScreen))
        # memory is read every tick (the kernel only on the slow probe)
        c.fleet.nodes["dgx7"].avail_kib = int(5.5 * GIB_KIB)
        screen = c.app.main_screen
        await wait_for(pilot, lambda: "dgx7" in screen._pending_nodes)
        table = screen.query_one(NodesTable)
        assert "5.5" not in str(table.get_cell("dgx7", "mem"))  # not painted under the modal
        await pilot.press("escape")
        await wait_for(pilot, lambda: "5.5" in str(table.get_cell("dgx7", "mem")))


async def test_serve_picker_shows_fit_refusal_for_boot_d():
    c = build()
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(c.app.screen, PickerScreen))
        picker = c.app.screen
        options = [o.id for o in picker.query_one("#picker").options]
        picker.query_one("#picker").highlighted = options.index("dsv41-flash-r37-4x-eager")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(c.app.screen, PickerScreen)
                       and c.app.screen is not picker)
        text = screen_text(c.app)
        # every cluster with its verdict and why, from the serve's own guards
        assert "on which cluster" in text
        assert "REFUSED     4nodes-switch  4 nodes  the recipe's own" in text
        assert "why: protected-node ×4 · fit (override) · image ×4" in text
        assert "why: fit (override) · image ×4" in text  # 4nodes-switch-b: no protected node
        await pilot.press("enter")  # none passes: the recipe's own cluster is the default
        await wait_for(pilot, lambda: isinstance(c.app.screen, RefusalScreen))
        text = screen_text(c.app)
        assert "REFUSE fit dsv41-flash-r37-4x-eager@4nodes-switch" in text
        assert "127.6 GB (118.84 GiB)" in text  # the Boot D numbers, not just a "no"
        assert "REFUSE protected-node dgx1" in text


async def test_unfinished_workflow_is_offered_at_start(tmp_path):
    from sparktui.tui.screens.info import ResumeScreen

    first = build(state_dir=tmp_path, speed=200.0)
    turn = first.power.turn

    async def plug_stuck_off(entity: str, on: bool):  # type: ignore[no-untyped-def]
        if on:
            raise RuntimeError("Home Assistant: 500 Internal Server Error")
        return await turn(entity, on)

    first.power.turn = plug_stuck_off  # type: ignore[method-assign]
    async with first.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(first))
        preview = await first.service.preview_power_cycle("dgx7")
        result = await preview.run()
        assert not result.ok and "UNFINISHED" in result.message
    # the console restarts on the same state dir: the journal still owes "plug on"
    second = build(state_dir=tmp_path)
    async with second.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: isinstance(second.app.screen, ResumeScreen))
        text = screen_text(second.app)
        assert "UNFINISHED: power-cycle dgx7" in text and "switch.dgx7" in text
        await pilot.press("tab", "tab", "enter")  # Later -> Close it -> Complete it…
        await wait_for(pilot, lambda: isinstance(second.app.screen, ConfirmActionScreen))
        assert "Complete power-cycle dgx7" in screen_text(second.app)


async def test_palette_offers_every_action_by_name():
    from textual.command import CommandPalette

    c = build()
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        await pilot.press("colon")
        await wait_for(pilot, lambda: isinstance(c.app.screen, CommandPalette))
        await typed(pilot, *"power-cycle dgx6")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen))
        assert c.app.screen.preview.target == "dgx6"
        await pilot.press("escape")
        await wait_for(pilot, lambda: c.app.screen is c.app.main_screen)
        await pilot.press("colon")
        await wait_for(pilot, lambda: isinstance(c.app.screen, CommandPalette))
        await typed(pilot, *"shift log")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "Shift log" in screen_text(c.app))
        assert "Nothing happened" in screen_text(c.app)


async def test_read_only_palette_has_no_actions():
    from sparktui.tui.commands import ActionCommands

    c = build(read_only=True)
    async with c.app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: nodes_painted(c))
        provider = ActionCommands(c.app.screen)
        names = [name for name, _, _ in provider._commands()]
        assert "shift log" in names and any(n.startswith("fit ") for n in names)
        assert not [n for n in names if n.split()[0] in ("serve", "stop", "power-cycle",
                                                           "recover", "cluster", "runlock")
                    and n != "runlock list"]
