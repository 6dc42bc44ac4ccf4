"""Issue 28 item 2: at 80 columns the verdict shows, the subject is what is
cut — a finished workflow's notice, and the Nodes table, whose key and status
columns (Node, State, Risk, Role, Kernel's verdict) stay in view however wide
"Busy with" grows."""

from __future__ import annotations

from sparktui.ops.workflows.runner import WorkflowResult
from sparktui.tui.widgets.alerts import NoticeLine

from .harness import build, wait_for
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
