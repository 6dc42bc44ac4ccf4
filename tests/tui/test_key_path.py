"""The key path (issues 13/16): what a pane key restyles and re-renders, the
tables' row caches across focus changes, the memory pane's fixed columns, and
the boot log drained at most LOG_PAINT_EVERY_S apart. Counts, not timings
(bench/bench_tui.py measures the time)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections import Counter

import pytest
from textual._compositor import Compositor
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from textual.geometry import Region
from textual.visual import Visual
from textual.widget import Widget
from textual.widgets import DataTable

from sparktui.core.config import Config, ThrashConfig
from sparktui.core.config_load import load_config
from sparktui.core.state import HistoryPoint
from sparktui.tui import FRAMES_PER_S
from sparktui.tui.screens.main import LOG_PAINT_EVERY_S, PANES
from sparktui.tui.widgets.bootlog import BootLog
from sparktui.tui.widgets.memory import MemoryPane
from sparktui.tui.widgets.pane import Pane
from sparktui.tui.widgets.tables import LanesTable, NodesTable
from sparktui.watch.follower import LogLine

from .fakecluster import add_lane, vllm_boot_lines
from .harness import ROOT, Console, build, wait_for
from .screen_text import screen_text


def polled_once() -> Config:
    """The shipped config with one poll at start and none for the test's length:
    what a test counts is not redrawn by a poll arriving meanwhile."""
    shipped = load_config(ROOT / "config.toml")
    return dataclasses.replace(shipped, console=shipped.console.with_tick(3600))


def all_probed(c: Console) -> bool:
    return all(s.probe is not None for s in c.service.snapshot().nodes)


def focus_marks_match(screen: DOMNode) -> None:
    for name in PANES:
        pane = screen.query_one(f"#{name}-pane", Pane)
        assert pane.has_class("-focused") == pane.has_focus_within, name


async def test_a_pane_key_restyles_the_two_panes_and_the_focus_change_only(monkeypatch) -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = c.app.main_screen
        applied: Counter[str] = Counter()
        apply = Stylesheet.apply

        def counting(self: Stylesheet, node: DOMNode, **kw: object) -> None:
            applied[type(node).__name__ if type(node) is not DOMNode else "component"] += 1
            apply(self, node, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(Stylesheet, "apply", counting)
        await pilot.press("2")
        await pilot.pause()
        monkeypatch.setattr(Stylesheet, "apply", apply)
        assert isinstance(screen.focused, LanesTable)
        focus_marks_match(screen)
        # the two panes once each; the table gaining focus (its scrollbars and
        # component styles); not the table losing it, hidden with its pane
        assert applied["Pane"] == 2
        assert (applied["NodesTable"], applied["LanesTable"]) == (0, 1)
        assert set(applied) <= {"Pane", "LanesTable", "ScrollBar", "component"}
        assert applied["component"] == len(DataTable.COMPONENT_CLASSES)
        applied.clear()
        full = Counter[str]()
        render_full_update = Compositor.render_full_update

        def counting_full(self: Compositor, *a: object, **kw: object) -> object:
            full["screen"] += 1
            return render_full_update(self, *a, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(Stylesheet, "apply", counting)
        monkeypatch.setattr(Compositor, "render_full_update", counting_full)
        await pilot.press("1", "2")  # each table shown again in the state it was styled for
        await pilot.pause()
        monkeypatch.setattr(Stylesheet, "apply", apply)
        assert applied == Counter({"Pane": 4})
        assert full["screen"] == 0  # a focus change repaints what changed, not the screen
        lanes, nodes = screen.query_one("#lanes-pane"), screen.query_one("#nodes-pane")
        assert lanes.display and not nodes.display
        assert lanes.styles.border_top != nodes.styles.border_top  # the focus shows
        for key in ("tab", "3", "shift+tab", "4", "1"):
            await pilot.press(key)
            await pilot.pause()
            focus_marks_match(screen)
        applied.clear()
        monkeypatch.setattr(Stylesheet, "apply", counting)
        for key in ("2", "3", "4", "1"):  # each pane's widget back in its styled state
            await pilot.press(key)
            await pilot.pause()
        monkeypatch.setattr(Stylesheet, "apply", apply)
        assert applied == Counter({"Pane": 8})
        # a pane's class selects no rule below it: what a restyle of the whole
        # subtree would give is what the pane's descendants have
        table = screen.query_one(NodesTable)
        before = (table.styles.get_rules(), table.rich_style)
        c.app.update_styles(screen.query_one("#nodes-pane"))
        assert (table.styles.get_rules(), table.rich_style) == before


def styles_of(widget: Widget) -> tuple[object, ...]:
    return (widget.styles.get_rules(), widget.rich_style,
            *(widget.get_component_rich_style(name) for name in sorted(widget.COMPONENT_CLASSES)))


async def test_a_widget_that_lost_focus_while_hidden_is_styled_as_unfocused_when_shown() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = c.app.main_screen
        nodes, lanes = screen.query_one(NodesTable), screen.query_one(LanesTable)
        log, memory = screen.query_one(BootLog), screen.query_one(MemoryPane)
        for key in ("3", "4", "2"):  # each loses focus as its pane is hidden
            await pilot.press(key)
            await pilot.pause()
        await pilot.resize_terminal(160, 48)  # all four panes shown
        await pilot.pause()
        assert nodes.display and not nodes.has_focus and lanes.has_focus
        for widget in (nodes, lanes, log, memory):
            shown = styles_of(widget)
            c.app.update_styles(widget)  # what a restyle in its present state gives
            assert styles_of(widget) == shown, widget.id
        assert styles_of(nodes) != styles_of(lanes)  # the focus shows


async def test_tables_keep_their_rows_across_focus_changes_and_follow_a_theme(
        monkeypatch) -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all_probed(c))
        await pilot.pause(0.3)
        table = c.app.main_screen.query_one(NodesTable)
        cells = Counter[str]()
        render_cell = DataTable._render_cell

        def counting(self: DataTable, *a: object, **kw: object):  # type: ignore[no-untyped-def]
            cells[self.id or ""] += 1
            return render_cell(self, *a, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(DataTable, "_render_cell", counting)
        for key in ("2", "1", "2"):  # each focus state rendered once
            await pilot.press(key)
            await pilot.pause()
        update_count = table._update_count
        cells.clear()
        await pilot.press("1")
        await pilot.pause()
        assert table.has_focus and table._update_count == update_count
        assert cells["nodes"] == 0  # shown again, focused again: nothing re-rendered
        region = Region(0, 0, *table.size)

        def fresh() -> list[object]:
            kept = table.render_lines(region)
            table._clear_caches()
            table.refresh()
            return [kept, table.render_lines(region)]

        kept, rendered = fresh()
        assert kept == rendered  # the kept rows are what a full render draws
        c.app.theme = "textual-light" if c.app.theme != "textual-light" else "nord"
        await pilot.pause()
        kept, rendered = fresh()
        assert cells["nodes"] > 0 and kept == rendered  # new styles: rendered anew
        text = screen_text(c.app)
        assert "dgx1" in text and "online" in text


async def test_a_same_size_resize_keeps_the_rows_a_new_size_does_not() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        table = c.app.main_screen.query_one(NodesTable)
        count = table._update_count
        await pilot.press("2", "1")
        await pilot.pause()
        assert table._update_count == count
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert table._update_count > count


async def test_memory_pane_rows_keep_their_columns() -> None:
    from textual.app import App, ComposeResult

    class MemApp(App[None]):
        def compose(self) -> ComposeResult:
            yield MemoryPane(["dgx5", "a-very-long-node-name"], ThrashConfig(), id="mem")

    app = MemApp()
    async with app.run_test(size=(90, 6)) as pilot:
        pane = app.query_one(MemoryPane)
        for node in pane.series:
            for i, (avail, psi) in enumerate([(60.0, 0.0), (20.0, 5.0), (3.0, 35.0)]):
                pane.add_point(node, HistoryPoint(float(i), int(avail * 1024 * 1024),
                                                  127_600_748, psi, psi))
        pane.render_now()
        await pilot.pause()
        rows = [line for line in screen_text(app).splitlines() if line.strip()]
        assert len(rows) == 3  # the header and one row per node: no wrapped name
        assert rows[1].startswith("dgx5 ") and rows[2].startswith("a-ver… ")
        # the current values right-aligned in their columns, at the same place
        assert rows[1].index("3.0") == rows[2].index("3.0")
        assert rows[1].rstrip().endswith("35.0") and rows[2].rstrip().endswith("35.0")
        assert rows[0].rstrip().endswith("%")
        assert len(rows[0].rstrip()) == len(rows[1].rstrip()) <= 90


async def test_a_flooding_boot_log_is_drained_at_most_every_interval() -> None:
    c = build()
    ranks = add_lane(c.fleet, "glm53-flash-eugr-2x", "2nodes-dac", ["dgx5", "dgx6"])
    async with c.app.run_test(size=(80, 24)) as pilot:
        for line in vllm_boot_lines(shards=4)[:3]:
            ranks[0].log.put_nowait(line)
        screen = c.app.main_screen
        await wait_for(pilot, lambda: screen.lane is not None, timeout=10)
        log = screen.query_one(BootLog)
        await wait_for(pilot, lambda: screen._log_inbox == [] and log.row_count > 0)
        await pilot.pause(2 * LOG_PAINT_EVERY_S)
        rows = log.row_count
        mine = [LogLine(0, None, f"flood line {i}") for i in range(3)]
        screen._log_inbox = [mine[0]]
        screen._drain_logs()  # the last drain was long ago: now
        assert log.row_count == rows + 1 and screen._log_inbox == []
        screen._log_inbox = mine[1:]
        screen._drain_logs()  # right after: the lines wait for the next drain
        assert log.row_count == rows + 1 and screen._log_inbox == mine[1:]
        await wait_for(pilot, lambda: log.row_count == rows + 3, timeout=2)
        assert [e.text for e in list(log.entries)[-3:]] == [m.text for m in mine]


async def test_the_memory_pane_is_drawn_again_for_new_data_not_for_a_focus_change(
        monkeypatch) -> None:
    c = build(config=polled_once())
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all_probed(c))
        screen = c.app.main_screen
        memory = screen.query_one(MemoryPane)
        await pilot.press("4")
        await pilot.pause()
        drawn, lined = Counter[str](), Counter[str]()
        draw, to_strips = MemoryPane._draw, Visual.to_strips

        def counting_draw(self: MemoryPane) -> object:
            drawn["draw"] += 1
            return draw(self)

        def counting_strips(widget: object, *a: object, **kw: object) -> object:
            lined[type(widget).__name__] += 1
            return to_strips(widget, *a, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(MemoryPane, "_draw", counting_draw)
        monkeypatch.setattr(Visual, "to_strips", staticmethod(counting_strips))
        before = screen_text(c.app)
        for key in ("1", "4", "tab", "shift+tab"):
            await pilot.press(key)
            await pilot.pause()
        assert memory.has_focus
        assert drawn["draw"] == 0 and lined["MemoryPane"] == 0
        assert screen_text(c.app) == before
        memory.add_point("dgx1", HistoryPoint(0.0, 1024 * 1024, 127_600_748, 50.0, 50.0))
        memory.render_now()
        await pilot.pause()
        assert drawn["draw"] == 1 and lined["MemoryPane"] == 1
        assert screen_text(c.app) != before


@pytest.mark.parametrize(("preset", "period"), [(None, 1 / FRAMES_PER_S), ("30", 1 / 30)])
def test_the_console_commands_set_the_frame_rate_before_textual_reads_it(
        preset: str | None, period: float) -> None:
    """In a fresh interpreter, as `sparktui console` and `sparktui demo` run
    (an operator's TEXTUAL_FPS is kept)."""
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    if preset is not None:
        env["TEXTUAL_FPS"] = preset
    program = ("import sparktui.cli.console_cmd, sparktui.cli.demo_cmd, textual.screen; "
               "print(textual.screen.UPDATE_PERIOD)")
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    assert float(done.stdout) == pytest.approx(period)


async def test_a_changed_cell_is_the_only_cell_rendered_again(monkeypatch) -> None:
    c = build(config=polled_once())
    async with c.app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: all_probed(c))
        await pilot.pause(0.3)
        table = c.app.main_screen.query_one(NodesTable)
        region = Region(0, 0, *table.size)
        table.render_lines(region)
        rendered = Counter[tuple[int, int]]()
        render_cell = DataTable._render_cell

        def counting(self: DataTable, row: int, column: int, *a: object, **kw: object):  # type: ignore[no-untyped-def]
            if row >= 0:
                rendered[(row, column)] += 1
            return render_cell(self, row, column, *a, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(DataTable, "_render_cell", counting)
        cells = table._last["dgx1"]
        busy = [key for key, _ in NodesTable.COLUMNS].index("busy")
        assert cells[busy] == "free"
        table.put_row("dgx1", (*cells[:busy], "gone", *cells[busy + 1:]))  # same width
        kept = table.render_lines(region)
        assert set(rendered) == {(0, busy)}  # not the other 80 cells
        table._clear_caches()
        table.refresh()
        assert kept == table.render_lines(region)  # what a full render draws
        assert len(rendered) == len(NodesTable.COLUMNS) * len(c.config.nodes)
