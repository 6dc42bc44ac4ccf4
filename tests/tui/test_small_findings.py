"""Issue 13's smaller findings, each checked at 80x24: no toast ever draws
(not over a modal, not over a table), help lists every binding and scrolls,
`:` is in the 80-column footer, Home goes to the top row, the shift log is
rendered Markdown."""

from __future__ import annotations

from textual.widgets import Markdown
from textual.widgets._toast import Toast

from sparktui.tui.bindings import all_bindings
from sparktui.tui.screens.info import HelpScreen, MarkdownScreen
from sparktui.tui.widgets.alerts import NoticeLine
from sparktui.tui.widgets.tables import NodesTable

from .harness import build, wait_for
from .screen_text import screen_text


async def test_messages_go_to_the_notice_line_never_a_toast_even_over_a_modal() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(c.app.screen, HelpScreen))
        c.app.notify("THRASH dgx6: the long prompt", title="alert", severity="error")
        await pilot.pause()
        assert not c.app.query(Toast) and not c.app.screen.query(Toast)
        rows = screen_text(c.app).splitlines()
        # said on the notice row under the modal (the row above the footer), not over it
        assert [i for i, row in enumerate(rows) if "the long prompt" in row] == [len(rows) - 2]
        assert "sparktui — keys" in "\n".join(rows)
        await pilot.press("escape")
        await pilot.pause()
        line = c.app.main_screen.query_one(NoticeLine)
        assert line.region.height == 1 and "the long prompt" in screen_text(c.app)


async def test_help_lists_every_binding_and_scrolls() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(c.app.screen, HelpScreen))
        await pilot.pause()
        seen = screen_text(c.app)
        body = c.app.screen.query_one("#dialog-body")
        assert body.max_scroll_y > 0  # more than fits at 80x24
        while body.scroll_y < body.max_scroll_y:
            await pilot.press("pagedown")
            await pilot.pause()
            seen += screen_text(c.app)
        for binding in all_bindings():
            assert binding.description in seen, binding.id


async def test_the_80_column_footer_offers_the_command_palette() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        footer = screen_text(c.app).splitlines()[-1]
        assert ": Commands" in footer or ":Commands" in footer.replace(" ", "")


async def test_home_goes_to_the_top_row() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        table = c.app.main_screen.query_one(NodesTable)
        await pilot.press("down", "down", "j")
        assert table.cursor_row == 3
        await pilot.press("home")
        assert table.cursor_row == 0 and table.selected_key == "dgx1"
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1


async def test_the_shift_log_is_rendered_markdown() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        source = c.service.shift_log()
        assert source.startswith("#")  # Markdown, as `sparktui shiftlog` prints it
        c.service.shift_log = lambda: source + "\n- dgx6 **up** again at 22:47\n"  # type: ignore[method-assign]
        c.app.show_shift_log()
        await wait_for(pilot, lambda: isinstance(c.app.screen, MarkdownScreen))
        await pilot.pause(0.2)
        assert c.app.screen.query(Markdown)
        text = screen_text(c.app)
        assert "dgx6 up again" in text and "**" not in text
