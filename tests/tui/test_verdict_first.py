"""Issue 28 item 2: at 80 columns the verdict shows, the subject is what is
cut — a finished workflow's notice, and the Nodes table, whose key and status
columns (Node, State, Risk, Role, Kernel's verdict) stay in view however wide
"Busy with" grows; the columns past the edge are a key press each away."""

from __future__ import annotations

from sparktui.ops.workflows.runner import WorkflowResult
from sparktui.tui.widgets.alerts import NoticeLine
from sparktui.tui.widgets.tables import LanesTable

from .harness import build, wait_for
from .scenes import scene_console, settled
from .screen_text import screen_text

LANE = "glm53-mxfp4-fp8-4x-r39-196k"
VERDICT = "PASSED (RU 293-word text clean, EN 337-word text clean, identifiers 6/6)"


async def test_a_finished_workflow_says_its_verdict_before_its_subject() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        async def qualified() -> WorkflowResult:
            return WorkflowResult("wf1", "qualify", LANE, True, f"{LANE}: {VERDICT}")

        c.app.run_worker(qualified(), group="actions", description=f"qualify {LANE}")
        notice = c.app.main_screen.query_one(NoticeLine)
        await wait_for(pilot, lambda: "PASSED" in str(notice.render()))
        await pilot.pause(0.1)
        row = next(line for line in screen_text(c.app).splitlines() if "done:" in line)
        assert row.lstrip().startswith("done: PASSED (RU 293-word text clean"), row
        assert row.count(LANE[:12]) <= 1, row  # the subject said once, at the end


async def test_the_nodes_table_keeps_role_and_kernel_when_busy_with_widens() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(s.probe is not None
                                          for s in c.service.snapshot().nodes))
        await pilot.pause(0.2)
        table = c.app.main_screen.query_one("NodesTable")
        long_busy = f"{LANE} r3 + {LANE}-b r0"
        for node in ("dgx5", "dgx8"):
            table.update_cell(node, "busy", long_busy, update_width=True)
        await pilot.pause(0.3)
        text = screen_text(c.app)
        header = next(line for line in text.splitlines() if "Node" in line and "State" in line)
        assert "Role" in header and "Kernel" in header, text
        rows = [line for line in text.splitlines() if line.startswith("│ dgx")]
        assert all(("prod*" in r or "test" in r) and r.rstrip().endswith("│")
                   for r in rows), text
        assert all(" 6.17" in r for r in rows if "online" in r), text


async def test_right_and_left_move_the_lanes_table_a_column_at_a_time() -> None:
    """Right scrolled the Lanes table one character a press at 80 columns
    (~40 presses to the last column, Cluster); it moves by a column."""
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        await pilot.press("2")
        table = c.app.main_screen.query_one(LanesTable)
        await wait_for(pilot, lambda: table.row_count == 1 and table.has_focus)
        await pilot.pause(0.1)
        assert table.max_scroll_x > 0, "the row fits: nothing to scroll"
        starts, x = [], 0
        for column in table.ordered_columns:
            starts.append(x)
            x += column.get_render_width(table)
        await pilot.press("right")
        await pilot.pause(0.05)
        assert table.scroll_x == min(starts[1], table.max_scroll_x) > 1
        presses = 1
        while table.scroll_x < table.max_scroll_x and presses < len(starts):
            await pilot.press("right")
            await pilot.pause(0.05)
            presses += 1
        assert table.scroll_x == table.max_scroll_x, (presses, table.scroll_x)
        assert "Cluster" in screen_text(c.app)
        for _ in range(presses):
            await pilot.press("left")
            await pilot.pause(0.05)
        assert table.scroll_x == 0
