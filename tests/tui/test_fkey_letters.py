"""Issue 28 item 9 (its F-key part): every F-key action has a letter too (F1-F4
do not reach the console through tmux 3.4 or mosh), and the refusal's `c`
shows the commands it would have run."""

from __future__ import annotations

from textual.binding import Binding

from sparktui.tui.bindings import all_bindings
from sparktui.tui.screens.alerts import AlertsScreen
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import PickerScreen, ResumeScreen, TextScreen

from .scenes import scene_console, serve_refused


def test_every_f_key_binding_has_a_letter() -> None:
    screens = (AlertsScreen, ConfirmActionScreen, RefusalScreen, PickerScreen, ResumeScreen,
               TextScreen)
    bindings = [*all_bindings(), *(b for s in screens for b in s.BINDINGS
                                   if isinstance(b, Binding))]
    for b in bindings:
        keys = [k.strip() for k in b.key.split(",")]
        if any(k[0] == "f" and k[1:].isdigit() for k in keys):
            assert any(len(k) == 1 or not (k[0] == "f" and k[1:].isdigit()) for k in keys), b


async def test_c_on_a_refusal_shows_every_command() -> None:
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await serve_refused(pilot, c)
        plan = c.app.screen.query_one("#plan")
        assert not plan.display
        await pilot.press("c")
        assert plan.display
