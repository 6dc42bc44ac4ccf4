"""The footer is rebuilt only when the keys it shows change: switching panes moves
focus (a bindings update each time) but shows the same keys."""

from __future__ import annotations

from textual.widgets._footer import FooterKey

from sparktui.tui.widgets.footer import StableFooter

from .harness import build, wait_for
from .screen_text import screen_text

NARROW = (80, 24)


async def test_pane_switches_keep_the_footer_keys_a_changed_key_list_rebuilds_them():
    c = build()
    async with c.app.run_test(size=NARROW) as pilot:
        await wait_for(pilot, lambda: "dgx8" in screen_text(c.app))
        footer = c.app.screen.query_one(StableFooter)
        before = list(footer.query(FooterKey))
        assert before
        for key in ("2", "3", "4", "1", "3", "1"):
            await pilot.press(key)
            await pilot.pause()
        assert list(footer.query(FooterKey)) == before          # the very same widgets
        assert "Serve" in screen_text(c.app).splitlines()[-1]
        footer._shown = ()                                        # as if the keys had changed
        footer.call_later(footer.bindings_changed, c.app.screen)  # in its own context
        await wait_for(pilot, lambda: list(footer.query(FooterKey)) != before)
        assert "Serve" in screen_text(c.app).splitlines()[-1]
