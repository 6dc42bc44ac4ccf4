"""Issue 28 item 9: the palette is a short command mode (k9s' `:serve
<recipe>`), not a flat fuzzy list of ~40 entries. Opened empty at 80x24 it
offers each verb once; choosing one opens it again with the verb typed, its
suggestions that verb's entries; a typed query reaches every entry."""

from __future__ import annotations

from textual.command import CommandInput, CommandPalette

from .harness import build, wait_for
from .screen_text import screen_text


def palette_rows(text: str) -> list[str]:
    return [r.strip() for r in text.splitlines()]


async def test_the_empty_palette_offers_each_verb_once_and_a_verb_suggests_its_entries() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(s.probe is not None
                                          for s in c.service.snapshot().nodes), timeout=20)
        await pilot.press("colon")
        await wait_for(pilot, lambda: "serve <recipe>" in screen_text(c.app), timeout=20)
        rows = palette_rows(screen_text(c.app))
        assert rows.count("fit <recipe>") == 1 and "recover <node>" in rows, rows
        # the flat list is what a search reaches, not what the palette opens on
        assert not any(r.startswith(("fit dsv41", "serve dsv41", "recover dgx")) for r in rows)
        assert "Theme" not in rows and "Screenshot" not in rows, rows  # ours alone
        await pilot.press("down", "enter")  # one Down: serve <recipe>
        await wait_for(pilot, lambda: isinstance(c.app.screen, CommandPalette)
                       and c.app.screen.query_one(CommandInput).value == "serve ")
        await wait_for(pilot, lambda: any(r.startswith("serve dsv41")
                                          for r in palette_rows(screen_text(c.app))),
                       timeout=20)
        rows = palette_rows(screen_text(c.app))
        assert not any(r.startswith(("fit ", "recover ")) for r in rows), rows
        # typed further, the suggestions narrow to that recipe
        await pilot.press(*"glm53-flash")
        await wait_for(pilot, lambda: "serve glm53-flash-eugr-2x" in palette_rows(
            screen_text(c.app)), timeout=20)


async def test_a_query_reaches_every_entry_directly() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.press("colon")
        await pilot.press(*"recover dgx6")
        await wait_for(pilot, lambda: "recover dgx6" in palette_rows(screen_text(c.app))[5:],
                       timeout=20)
