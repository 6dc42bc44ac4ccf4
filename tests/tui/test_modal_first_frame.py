"""Issue 28 item 7: modals sometimes drew a first frame too tall, their
buttons hidden, for ~1 s. Textual sets a screen's breakpoint classes
(``-short`` at 80x24: the modal body's max height) when the screen's first
Resize event is handled, after its first layout; on a busy console that event
waited behind the rest, and the modal was laid out for a tall terminal
meanwhile. The console sets them as the screen is shown, so a modal's first
layout is its 80x24 one whatever becomes of that event (here: never handled)."""

from __future__ import annotations

import pytest
from textual.events import Resize
from textual.screen import Screen

from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen

from .scenes import hold_still, scene_console, select_node, settled
from .screen_text import screen_text


async def _resize_never_handled(self: Screen[object], event: Resize) -> None:
    event.stop()


@pytest.mark.parametrize(("node", "modal", "button"), [
    ("dgx7", ConfirmActionScreen, "Confirm power-cycle"),
    ("dgx2", RefusalScreen, "Close")])
async def test_a_modal_is_laid_out_for_80x24_before_its_resize_event(
        monkeypatch: pytest.MonkeyPatch, node: str, modal: type, button: str) -> None:
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        await hold_still(c)
        monkeypatch.setattr(Screen, "_on_resize", _resize_never_handled)
        await select_node(pilot, c, node)
        await pilot.press("P")
        for _ in range(200):
            if isinstance(c.app.screen, modal):
                break
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        screen = c.app.screen
        assert isinstance(screen, modal)
        assert screen.has_class("-short"), screen.classes
        text = screen_text(c.app)
        assert button in text, text
        body = screen.query_one("#dialog-body")
        assert body.region.height <= 12, body.region
