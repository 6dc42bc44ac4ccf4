"""Issue 28 item 7, state that reads wrong, at 80x24: a read-only console
does not offer a key it refuses (the empty Lanes pane said "s serves a recipe")."""

from __future__ import annotations

import pytest

from .harness import build, wait_for
from .screen_text import screen_text


@pytest.mark.parametrize("read_only", [False, True])
async def test_the_empty_lanes_pane_offers_s_only_where_s_serves(read_only: bool) -> None:
    c = build(read_only=read_only)
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: c.app.main_screen.current_pane == "lanes")
        await pilot.pause()
        text = screen_text(c.app)
        assert "no lane yet" in text, text
        assert ("s serves a recipe" in text) is not read_only, text
        if read_only:
            assert "read-only: a writable console serves one" in text, text
