"""Issue 28 item 5, the boot log at 80x24: wrap keeps every character at each
fold (with the scrollbar up), clearing a search takes its sideways scroll
with it, the console's canary request and its tagged model list fold with its
probes under `h`, and the header is two rows, never a third hidden under the log."""

from __future__ import annotations

from textual.app import App, ComposeResult

from sparktui.tui.widgets.bootlog import BootLog
from sparktui.watch.follower import LogLine

from .harness import typed, wait_for
from .scenes import LANE, NCCL_LINE, scene_console, settled
from .screen_text import screen_text

LONG = "Launching headless engine " + " ".join(f"word{i:03d}" for i in range(40))
CANARY = 'INFO:     127.0.0.1:41840 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
TAGGED = 'INFO:     127.0.0.1:48136 - "GET /v1/models?sparktui=33ef5641ecdd HTTP/1.1" 200 OK'
"""The console's identity check (adapters/engine_http.py `models`, tagged): it
stayed in a serving lane's log between the engine's lines (the demo's incident
screenshot at 160x48), its port and tag a new pair every run."""


class LogApp(App[None]):
    CSS = "BootLog { height: 1fr; scrollbar-size-vertical: 1; }"

    def compose(self) -> ComposeResult:
        yield BootLog()


async def test_wrap_keeps_every_character_and_the_canary_folds() -> None:
    app = LogApp()
    async with app.run_test(size=(80, 24)) as pilot:
        log = app.query_one(BootLog)
        log.wrap = log.follow = True
        log.add_lines([LogLine(0, None, f"filler {i}") for i in range(40)]
                      + [LogLine(0, None, LONG), LogLine(0, None, CANARY),
                         LogLine(0, None, TAGGED)])
        await pilot.pause(0.1)
        log.scroll_end(animate=False, immediate=True)
        await pilot.pause(0.2)
        rows = [line[6:].rstrip() for line in screen_text(app).splitlines()]
        start = next(i for i, r in enumerate(rows) if r.startswith("Launching"))
        joined = ""
        for r in rows[start:]:
            if r.startswith("filler") or not r:
                break
            joined += r
        # (a fold can fall on a space, which the row's right strip took)
        assert LONG.replace(" ", "") in joined.replace(" ", ""), rows[start:start + 4]
        assert "›" not in joined
        assert log.folded == 2 and "POST /v1/chat" not in screen_text(app)
        assert "sparktui=" not in screen_text(app)


async def test_clearing_a_search_and_the_header_at_80x24() -> None:
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        await pilot.press("3", "slash")
        await typed(pilot, *"nccl_timeout")
        await pilot.press("enter")
        log = c.app.main_screen.query_one(BootLog)
        await wait_for(pilot, lambda: log.match_row is not None and log.scroll_x > 0)
        text = screen_text(c.app)
        head = text.splitlines()[4:6]  # the two banner rows under the pane's frame
        assert "LOADING WEIGHTS" in head[0] and head[1].lstrip("│ ").startswith("[PAUSED"), text
        await pilot.press("slash", "enter")  # an empty search clears it
        await pilot.pause(0.1)
        assert log.search == "" and log.scroll_x == 0
        assert "nccl" not in NCCL_LINE[:60] and "(EngineCore" in screen_text(c.app)


async def test_switching_rank_takes_a_searchs_sideways_scroll_with_it() -> None:
    """The offset a search scrolled to stayed when the operator switched rank
    (~30 Left presses to undo): another rank's log starts at its first column."""
    c = scene_console()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, c)
        await pilot.press("3", "slash")
        await typed(pilot, *"nccl_timeout")
        await pilot.press("enter")
        log = c.app.main_screen.query_one(BootLog)
        await wait_for(pilot, lambda: log.match_row is not None and log.scroll_x > 0)
        c.app.main_screen.select_lane(LANE, 1)
        await pilot.pause(0.1)
        assert c.app.main_screen.rank == 1 and log.scroll_x == 0
