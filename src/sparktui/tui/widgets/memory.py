"""Per-node sparklines of MemAvailable and memory PSI, the risk in words."""

from __future__ import annotations

from collections import deque

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Label, Sparkline

from sparktui.core.state import KIB_PER_GIB, HistoryPoint
from sparktui.core.thrash import ThrashLevel

POINTS = 60
"""Samples drawn per sparkline: two minutes at the 2 s poll."""
RISK_CLASSES = {ThrashLevel.OK: "-risk-ok", ThrashLevel.PRESSURE: "-risk-pressure",
                ThrashLevel.SUSPECTED: "-risk-suspected", ThrashLevel.THRASH: "-risk-thrash"}


class MemoryRow(Horizontal):
    def __init__(self, node: str) -> None:
        super().__init__(id=f"mem-{node}", classes="memory-row -risk-ok")
        self.node = node
        self.avail: deque[float] = deque(maxlen=POINTS)
        self.psi: deque[float] = deque(maxlen=POINTS)
        self.level = ThrashLevel.OK
        self.dirty = False

    def compose(self) -> ComposeResult:
        yield Label(self.node, classes="mem-node")
        yield Label("ok", classes="mem-risk")
        yield Sparkline([], summary_function=min, classes="mem-avail")
        yield Label("—", classes="mem-avail-now")
        yield Sparkline([], summary_function=max, classes="mem-psi")
        yield Label("—", classes="mem-psi-now")

    def add_point(self, point: HistoryPoint) -> None:
        if point.mem_available_kib is not None:
            self.avail.append(point.mem_available_kib / KIB_PER_GIB)
        if point.psi_full_avg10 is not None:
            self.psi.append(point.psi_full_avg10)
        self.dirty = True

    def set_level(self, level: ThrashLevel) -> None:
        if level is not self.level:
            self.level = level
            self.dirty = True

    def render_now(self) -> None:
        """Push the buffered points to the widgets (skipped while hidden)."""
        if not self.dirty:
            return
        self.dirty = False
        # one sample has no trend: the line starts with the second
        self.query_one(".mem-avail", Sparkline).data = list(self.avail) if len(self.avail) > 1 \
            else []
        self.query_one(".mem-psi", Sparkline).data = list(self.psi) if len(self.psi) > 1 else []
        self.query_one(".mem-avail-now", Label).update(
            f"{self.avail[-1]:5.1f}G" if self.avail else "—")
        self.query_one(".mem-psi-now", Label).update(
            f"{self.psi[-1]:4.1f}%" if self.psi else "—")
        word = "ok" if self.level is ThrashLevel.OK else self.level.label
        self.query_one(".mem-risk", Label).update(word)
        for cls in RISK_CLASSES.values():
            self.remove_class(cls)
        self.add_class(RISK_CLASSES[self.level])


class MemoryPane(VerticalScroll):
    def __init__(self, nodes: list[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.nodes = nodes

    def compose(self) -> ComposeResult:
        with Horizontal(classes="memory-row memory-head"):
            yield Label("node", classes="mem-node")
            yield Label("risk", classes="mem-risk")
            yield Label("MemAvailable (2 min)", classes="mem-avail")
            yield Label("", classes="mem-avail-now")
            yield Label("PSI full avg10", classes="mem-psi")
            yield Label("", classes="mem-psi-now")
        for node in self.nodes:
            yield MemoryRow(node)

    def row(self, node: str) -> MemoryRow:
        return self.query_one(f"#mem-{node}", MemoryRow)

    def render_now(self) -> None:
        for row in self.query(MemoryRow):
            row.render_now()
