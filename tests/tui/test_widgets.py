"""The boot log and memory widgets on their own: bounded buffer, filters,
wrap, search, marks in words; sparklines on a fixed scale."""

from __future__ import annotations

from collections import deque

from textual.app import App, ComposeResult

from sparktui.core.config import ThrashConfig
from sparktui.core.state import HistoryPoint
from sparktui.tui.widgets.bootlog import BootLog
from sparktui.tui.widgets.memory import MemoryPane, bars
from sparktui.tui.widgets.tables import KeyedTable
from sparktui.watch.follower import LogLine

from .screen_text import screen_text

FATAL = "(EngineCore_DP0 pid=312) ERROR 11-29 22:50:00 [core.py:900] EngineCore encountered a " \
        "fatal error."
WARN = "(EngineCore_DP0 pid=312) WARNING 11-29 22:50:00 [shm_broadcast.py:466] No available " \
       "shared memory broadcast block found in 60 seconds."


class LogApp(App[None]):
    def __init__(self, max_lines: int = 100) -> None:
        super().__init__()
        self.max_lines = max_lines

    def compose(self) -> ComposeResult:
        yield BootLog(max_lines=self.max_lines, id="log")


def lines(n: int, start: int = 0) -> list[LogLine]:
    return [LogLine(0, None, f"line {i} " + "x" * (i % 7)) for i in range(start, start + n)]


async def test_buffer_is_bounded_and_rows_follow_eviction():
    app = LogApp(max_lines=100)
    async with app.run_test(size=(60, 12)) as pilot:
        log = app.query_one(BootLog)
        for k in range(5):
            log.add_lines(lines(70, 70 * k))
        await pilot.pause()
        assert len(log.entries) == 100 and log.row_count == 100
        assert log.entries[0].text.startswith("line 250")
        log.add_lines(lines(500, 1000))  # a burst bigger than the buffer
        assert log.row_count == 100 and log.entries[-1].text.startswith("line 1499")
        assert log.scroll_y == log.max_scroll_y  # following: at the end


async def test_severity_and_text_filters_and_fatal_mark():
    app = LogApp()
    async with app.run_test(size=(100, 12)) as pilot:
        log = app.query_one(BootLog)
        log.add_lines([*lines(5), LogLine(1, None, WARN), LogLine(1, None, FATAL), *lines(3, 5)])
        await pilot.pause()
        assert log.row_count == 10
        log.cycle_level()  # warn+
        assert log.row_count == 2 and log.level_name == "warn+"
        log.cycle_level()  # fatal
        assert log.row_count == 1
        await pilot.pause()
        text = screen_text(app)
        assert "r1  ! " in text and "encountered a fatal" in text  # marked in words
        log.cycle_level()
        log.text_filter = "line 6"
        assert log.row_count == 1
        log.text_filter = ""
        assert log.row_count == 10


async def test_wrap_search_and_pause():
    app = LogApp()
    async with app.run_test(size=(40, 10)) as pilot:
        log = app.query_one(BootLog)
        log.add_lines([LogLine(0, None, "a" * 100), *lines(40)])
        log.wrap = True
        await pilot.pause()
        # 100 chars at 40 - 1 scrollbar - 6 gutter columns: 4 rows
        assert log.row_count == 40 + 4
        log.search = "line 3"
        assert log.find_next() and not log.follow
        first = log.match_row
        assert first is not None
        assert log.find_next() and log.match_row != first  # line 30 after line 3
        before = log.scroll_y
        log.add_lines(lines(5, 100))  # paused: new lines do not move the view
        assert log.scroll_y == before


def test_memory_bars_use_a_fixed_scale():
    calm = bars(deque([110.0, 110.04, 110.0]), 10, 121.7, min, lambda v: "")
    assert set(calm.plain.strip()) == {"▇"}  # 40 MB of noise is not a cliff
    falling = bars(deque([110.0, 60.0, 3.0]), 3, 121.7, min, lambda v: "")
    assert falling.plain == "▇▄▁"
    many = bars(deque(float(i) for i in range(100)), 10, 100.0, max, lambda v: "")
    assert len(many.plain) == 10 and many.plain[-1] == "█"
    assert bars(deque([5.0]), 4, 100.0, max, lambda v: "").plain == "····"


class MemApp(App[None]):
    def compose(self) -> ComposeResult:
        yield MemoryPane(["dgx5", "dgx6"], ThrashConfig(), id="mem")


async def test_memory_pane_shows_values_and_risk_words():
    from sparktui.core.thrash import ThrashLevel

    app = MemApp()
    async with app.run_test(size=(90, 6)) as pilot:
        pane = app.query_one(MemoryPane)
        for i, (avail, psi) in enumerate([(60.0, 0.0), (20.0, 5.0), (3.0, 35.0)]):
            pane.add_point("dgx6", HistoryPoint(float(i), int(avail * 1024 * 1024),
                                                127_600_748, psi, psi))
        pane.set_level("dgx6", ThrashLevel.THRASH)
        pane.render_now()
        await pilot.pause()
        text = screen_text(app)
        assert "dgx6   thrash" in text and "3.0" in text and "35.0" in text


class Narrow(KeyedTable):
    COLUMNS = (("state", "State"), ("busy", "Busy with"), ("problem", "Problem"),
               ("kernel", "Kernel"))
    SHRINK = ("busy", "problem")


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Narrow(id="t")


async def test_an_empty_shrink_column_gives_its_width_up_only_while_too_narrow() -> None:
    """A STARVED node's age widened State at 80 columns and pushed Kernel off
    the edge past a Problem column holding nothing but its header."""
    app = TableApp()
    async with app.run_test(size=(42, 8)) as pilot:
        table = app.query_one(Narrow)
        table.put_row("a", ("online", "glm53-mxfp4", "", "6.17.0-1031"))
        await pilot.pause()
        widths = {c.key.value: c.width for c in table.ordered_columns}
        assert widths["problem"] >= 6 and widths["busy"] >= 6      # room for both
        table.put_row("a", ("STARVED 8m00s", "glm53-mxfp4", "", "6.17.0-1031"))
        await pilot.pause()
        widths = {c.key.value: c.width for c in table.ordered_columns}
        assert widths["problem"] == 0 and widths["busy"] >= 6, widths
        assert "6.17.0-1031" in screen_text(app)
        table.put_row("a", ("STARVED 8m00s", "glm53-mxfp4", "nas missing", "6.17.0-1031"))
        await pilot.pause()
        widths = {c.key.value: c.width for c in table.ordered_columns}
        assert widths["problem"] >= 6, widths                      # shown again
