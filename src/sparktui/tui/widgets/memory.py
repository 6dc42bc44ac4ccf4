"""Per-node sparklines of MemAvailable and memory PSI, the risk in words.

One widget draws every row: a pane of 8 nodes is one node in the DOM, so
focus and style changes stay cheap while the data keeps coming. The lines
are drawn on a fixed scale (0 to MemTotal, 0 to 100 %), not textual's
Sparkline, which stretches min..max of the data: 40 MB of noise on an idle
node would look like a crash, and a node at 3 GiB like one at 100.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.text import Text
from textual.strip import Strip
from textual.style import Style
from textual.visual import Visual, visualize
from textual.widget import Widget

from sparktui.core.config import ThrashConfig
from sparktui.core.state import KIB_PER_GIB, HistoryPoint
from sparktui.core.thrash import ThrashLevel
from sparktui.tui.widgets.pane import RestyledWhileShown

POINTS = 60
"""Samples drawn per sparkline: two minutes at the 2 s poll."""
FIXED = 6 + 16 + 7 + 7 + 5
"""Columns used by node, risk and the two current values, and the five gaps."""
RISK_STYLE = {ThrashLevel.OK: "", ThrashLevel.PRESSURE: "yellow",
              ThrashLevel.SUSPECTED: "bold yellow", ThrashLevel.THRASH: "bold red reverse"}
BARS = "▁▂▃▄▅▆▇█"


@dataclass
class NodeSeries:
    avail_gib: deque[float] = field(default_factory=lambda: deque(maxlen=POINTS))
    psi_full: deque[float] = field(default_factory=lambda: deque(maxlen=POINTS))
    total_gib: float = 0.0
    level: ThrashLevel = ThrashLevel.OK


class MemoryPane(RestyledWhileShown, Widget, can_focus=True):
    DEFAULT_CSS = "MemoryPane { height: auto; }"

    def __init__(self, nodes: list[str], thrash: ThrashConfig, *,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.series = {n: NodeSeries() for n in nodes}
        self.thrash = thrash
        self.predicted: dict[str, str] = {}
        """node -> the predicted OOM of a rank loading on it (core/oom_predict)."""
        self.dirty = False
        self.relayout = False
        self._drawn: tuple[int, Visual] | None = None
        """The last render and the width it was drawn for, until the data change."""
        self._lines: tuple[Visual, int, Style, list[Strip]] | None = None
        """That render as lines: for a height and the widget's style."""

    def _changed(self) -> None:
        self.dirty = True
        self._drawn = None

    def add_point(self, node: str, point: HistoryPoint) -> None:
        s = self.series[node]
        if point.mem_available_kib is not None:
            s.avail_gib.append(point.mem_available_kib / KIB_PER_GIB)
        if point.mem_total_kib:
            s.total_gib = point.mem_total_kib / KIB_PER_GIB
        if point.psi_full_avg10 is not None:
            s.psi_full.append(point.psi_full_avg10)
        self._changed()

    def set_level(self, node: str, level: ThrashLevel) -> None:
        if self.series[node].level is not level:
            self.series[node].level = level
            self._changed()

    def set_predicted(self, predicted: dict[str, str]) -> None:
        """The nodes with a predicted OOM and its one-line evidence."""
        if predicted != self.predicted:
            self.relayout = self.relayout or len(predicted) != len(self.predicted)
            self.predicted = dict(predicted)
            self._changed()

    def render_now(self) -> None:
        """Paint what arrived (skipped by the screen while the pane is hidden)."""
        if self.dirty:
            self.dirty = False
            self.refresh(layout=self.relayout)  # a prediction line more or less
            self.relayout = False

    def render(self) -> Visual:
        """The rows as plain text lines in fixed columns (a rich Table laid out
        the same cells at ~10x the cost), kept until the data or the width
        change."""
        if self._drawn is None or self._drawn[0] != self.size.width:
            self._drawn = (self.size.width, visualize(self, self._draw()))
        return self._drawn[1]

    def render_line(self, y: int) -> Strip:
        """Textual draws a widget's lines again after every refresh, a focus
        change among them: 8 nodes' sparklines cost ~7 ms, most of a pane key.
        The lines are kept while the render, the height and the style are
        the same."""
        width, height = self.size
        visual, style = self.render(), self.visual_style
        if self._lines is None or self._lines[:3] != (visual, height, style):
            self._lines = (visual, height, style,
                           Visual.to_strips(self, visual, width, height, style))
        lines = self._lines[3]
        return lines[y] if y < len(lines) else Strip.blank(width, style.rich_style)

    def _draw(self) -> RenderableType:
        spark_w = max(6, (self.size.width - FIXED) // 2)
        widths = (6, 16, spark_w, 7, spark_w, 7)
        lines = [row(widths, [Text(h, style="bold dim") for h in (
            "node", "risk", "MemAvailable", "GiB", "PSI full avg10", "%")])]
        t = self.thrash
        for node, s in self.series.items():
            word = "ok" if s.level is ThrashLevel.OK else s.level.label
            risk = Text(word, style=RISK_STYLE[s.level])
            if node in self.predicted and s.level < ThrashLevel.THRASH:
                risk = Text("OOM predicted", style="bold red")
            low = max(t.mem_available_low_gib, t.mem_available_low_frac * s.total_gib)

            def mem_style(gib: float, low: float = low) -> str:
                return "red" if gib < low else "yellow" if gib < 2 * low else "green"

            def psi_style(pct: float) -> str:
                return ("red" if pct >= t.psi_full_suspect else
                        "yellow" if pct >= t.psi_some_pressure else "green")

            lines.append(row(widths, [
                Text(node), risk,
                bars(s.avail_gib, spark_w, s.total_gib or 128.0, min, mem_style),
                Text(f"{s.avail_gib[-1]:.1f}" if s.avail_gib else "—"),
                bars(s.psi_full, spark_w, 100.0, max, psi_style),
                Text(f"{s.psi_full[-1]:.1f}" if s.psi_full else "—")]))
        grid = Text("\n", no_wrap=True, overflow="crop").join(lines)
        if not self.predicted:
            return grid
        notes = Text()
        for node, line in self.predicted.items():
            notes.append("\n! ", style="bold red")
            notes.append(line if line.startswith(node) else f"{node}: {line}")
        return Group(grid, notes)


RIGHT = {3, 5}
"""The columns of current values, aligned right."""


def row(widths: tuple[int, ...], cells: list[Text]) -> Text:
    """One line: each cell cut or padded to its column, one space between."""
    parts: list[Text | str] = []  # a pad takes its cell's style, as in a rich Table
    for i, (width, cell) in enumerate(zip(widths, cells, strict=True)):
        if cell.cell_len > width:
            cell = cell.copy()
            cell.truncate(width, overflow="ellipsis")
        pad = Text(" " * (width - cell.cell_len), style=cell.style)
        parts += [" "] if i else []
        parts += [pad, cell] if i in RIGHT else [cell, pad]
    return Text.assemble(*parts)


def bars(values: deque[float], width: int, top: float,
         summary: Callable[[list[float]], float], style_of: Callable[[float], str]) -> Text:
    """The newest samples at the right edge, one bar per sample (or per bucket
    when there are more samples than columns), 0..top mapped to 8 heights."""
    if len(values) < 2:
        return Text("·" * width, style="dim")  # one sample has no trend
    data = list(values)
    if len(data) > width:
        step = len(data) / width
        data = [summary(data[int(i * step):max(int(i * step) + 1, int((i + 1) * step))])
                for i in range(width)]
    text = Text(" " * (width - len(data)))
    for v in data:
        level = round(max(0.0, min(1.0, v / top)) * (len(BARS) - 1))
        text.append(BARS[level], style=style_of(v))
    return text
