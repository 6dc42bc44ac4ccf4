"""Issue 28 item 8: a refusal shows what it would have run. At 80x24 the
refused power cycle of a protected node listed "1. plug check" only (the
other eight steps below the fold); every step is now in view, numbered, with
the refusal's reasons above it."""

from __future__ import annotations

from sparktui.tui.screens.confirm import RefusalScreen, plan_parts

from .scenes import refusal_modal, scene_console
from .screen_text import screen_text


async def test_a_refused_power_cycle_shows_every_step_it_would_have_run_at_80x24() -> None:
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await refusal_modal(pilot, c)
        screen = c.app.screen
        assert isinstance(screen, RefusalScreen)
        steps = plan_parts(screen.preview)[0]
        assert len(steps) == 9
        text = " ".join(screen_text(c.app).split())
        assert "Why: protected-node dgx2" in text, text
        assert "Would have run (9 steps)" in text, text
        for i, step in enumerate(steps, 1):
            assert f"{i}. {step.step}" in text, (i, step.step, screen_text(c.app))
