"""The Nodes and Lanes tables: rows keyed by node or lane name and updated
cell by cell in place, never cleared and rebuilt."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar, cast

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.coordinate import Coordinate
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import Column, RowKey

from sparktui.core.canary import stale_age
from sparktui.core.config import Config, GuardConfig
from sparktui.core.kernel import known_bad, off_pin
from sparktui.core.loadprogress import format_duration
from sparktui.core.nodehealth import Finding
from sparktui.core.state import KIB_PER_GIB, NodeSnapshot, NodeState
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.service.lanes import LaneView
from sparktui.tui.bindings import TABLE_BINDINGS
from sparktui.tui.widgets.pane import RestyledWhileShown

if TYPE_CHECKING:
    from sparktui.tui.app import SparkTUI

AGE_EVERY_S = 1.0
"""Seconds between two repaints of the rows that show a stale age."""

STATE_WORDS = {
    NodeState.ONLINE: "online",
    NodeState.STARVED: "STARVED",
    NodeState.UNREACHABLE: "UNREACHABLE",
    NodeState.POWERED_OFF: "off",
    NodeState.UNKNOWN: "unknown",
}
STATE_STYLES = {
    NodeState.ONLINE: "green",
    NodeState.STARVED: "bold red",
    NodeState.UNREACHABLE: "bold red",
    NodeState.POWERED_OFF: "dim",
    NodeState.UNKNOWN: "yellow",
}
RISK_WORDS = {ThrashLevel.OK: "ok", ThrashLevel.PRESSURE: "PRESSURE",
              ThrashLevel.SUSPECTED: "SUSPECT", ThrashLevel.THRASH: "THRASH"}
"""Short enough for 80 columns; the alert bar and details spell them out."""


SHRINK_MIN = 6
"""Characters a shrunk column keeps (``glm53…``)."""
CELL_CACHE = 4096
"""Rendered cells kept (rows x columns x cursor and focus states; cleared whole when full)."""
SegmentLines = list[list[Segment]]


def _set_width(column: Column, width: int) -> bool:
    """Fix ``column``'s width at ``width``; True if that changed it."""
    if not column.auto_width and column.width == width:
        return False
    column.auto_width, column.width = False, width
    return True


class KeyedTable(RestyledWhileShown, DataTable[Text | str]):
    """A DataTable whose rows are addressed by a string key."""

    COLUMNS: Sequence[tuple[str, str]] = ()
    SHRINK: Sequence[str] = ()
    """Columns narrowed (their text cut with …) so that every column fits the
    table's width, as k9s does: the key and status columns keep their width,
    and none is pushed off the right edge because a free-text one widened."""
    BINDINGS: ClassVar[list[BindingType]] = list(TABLE_BINDINGS)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._last: dict[str, tuple[Text | str, ...]] = {}
        self._restyled = False
        self._rendered_with: tuple[object, ...] | None = None
        self._styles_by_state: dict[object, tuple[object, ...]] = {}
        self._sized: Size | None = None
        self._cells: dict[tuple[object, ...], tuple[object, SegmentLines]] = {}
        """Rendered cells with the value each was rendered from (see `_render_cell`)."""

    def on_mount(self) -> None:
        self._ensure_columns()

    # -- keeping rendered rows across focus changes ----------------------------

    def notify_style_update(self) -> None:
        """DataTable drops every rendered row on any style update, and focus
        moving in or out is one (``:focus`` styles): a pane key re-rendered
        every cell (~0.3 ms each, 20+ ms for the nodes). Its row caches are
        keyed by the focus state already; they are dropped at the next render
        only if the styles of that state changed (a theme, say)."""
        super(DataTable, self).notify_style_update()  # the widget's own, not DataTable's
        self.remember_style_state()
        self._styles_cache.clear()
        self._restyled = True
        self.refresh()

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._restyled:
            self._restyled = False
            self._check_styles()
        return super().render_lines(crop)

    def _check_styles(self) -> None:
        """Called after a restyle, once component styles are final."""
        styles = (self.rich_style, *(self.get_component_styles(name)
                                     for name in sorted(self.COMPONENT_CLASSES)))
        if styles == self._rendered_with:
            return
        # the per-cell style cache is keyed by neither focus nor styles
        self._get_styles_to_render_cell.cache_clear()
        state = self.get_pseudo_class_state()
        if self._styles_by_state.get(state, styles) != styles:
            self._clear_caches()
        self._styles_by_state[state] = styles
        self._rendered_with = styles

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._cells.clear()

    def _render_cell(self, row_index: int, column_index: int, base_style: Style,
                     width: int, cursor: bool = False, hover: bool = False) -> SegmentLines:
        """DataTable keys its rendered cells by a counter that every
        `update_cell` bumps: a poll that changed one number in a row rendered
        every cell of the table again (~0.2 ms each through rich, 81 for the
        nodes: 10-20 ms a poll while it shows, and on the pane key that shows
        it). A cell is kept here with the value it was rendered from and drawn
        again only when that value is replaced; everything else DataTable's
        key holds (style, width, cursor, hover, focus) is this key too."""
        if row_index < 0 or column_index < 0:  # the header and row labels, as DataTable does
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key, column_key = self.coordinate_to_cell_key(Coordinate(row_index, column_index))
        value = self.get_cell(row_key, column_key)
        key = (row_key, column_key, row_index, base_style, width, cursor, hover,
               self._show_hover_cursor, self._pseudo_class_state)
        kept = self._cells.get(key)
        if kept is not None and kept[0] is value:
            return kept[1]
        lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        if len(self._cells) >= CELL_CACHE:
            self._cells.clear()
        self._cells[key] = (value, lines)
        return lines

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """DataTable measures its columns here (the one place every change of
        content width passes); the shrinkable ones are then fitted to the
        table's width and the virtual size measured again if they moved."""
        super()._update_dimensions(new_rows)
        if self._fit_columns():
            super()._update_dimensions(())

    def _on_resize(self, event: events.Resize) -> None:
        """A pane shown again (1-4 at 80x24) gets a Resize of the same size,
        on which DataTable would invalidate every rendered row: only a real
        change of size is passed on (and refits the columns)."""
        if event.size == self._sized:
            event.prevent_default()  # DataTable's handler is the only other one
        elif self._fit_columns():
            super()._update_dimensions(())
        self._sized = event.size

    def _fit_columns(self) -> bool:
        """Give the SHRINK columns what the others leave of the width (never
        less than SHRINK_MIN each, never more than their content); True if a
        width changed. When that leaves too little for SHRINK_MIN each, a
        SHRINK column with nothing in any row gives its width up (its header
        only would push the last columns off the edge: a STARVED node's age
        widened State and cut Kernel to ``6.17.0-`` beside an empty Problem)."""
        width = self.scrollable_content_region.width
        if not self.SHRINK or width <= 0 or not self.columns:
            return False
        pad = 2 * self.cell_padding
        shrink = [c for c in self.ordered_columns if c.key.value in self.SHRINK]
        fixed = sum(c.get_render_width(self) for c in self.ordered_columns
                    if c.key.value not in self.SHRINK)
        room = width - fixed - pad * len(shrink)
        wanted = sorted(shrink, key=lambda c: c.content_width)
        hidden = [c for c in wanted if self._empty(c.key.value)] \
            if room < SHRINK_MIN * len(shrink) else []
        wanted = [c for c in wanted if c not in hidden]
        changed = False
        for column in hidden:
            changed |= _set_width(column, 0)
        for i, column in enumerate(wanted):  # the narrowest first: all it wants
            new = min(column.content_width, max(SHRINK_MIN, room // (len(wanted) - i)))
            room -= new
            changed |= _set_width(column, new)
        return changed

    def _empty(self, key: str | None) -> bool:
        """No row shows anything in column ``key``."""
        i = next(n for n, (k, _) in enumerate(self.COLUMNS) if k == key)
        return not any(str(cells[i]) for cells in self._last.values())

    def action_cursor_right(self) -> None:
        """Right: the next column to the left edge (the stock row cursor
        scrolled one character a press: ~40 presses to the Lanes' last column)."""
        if self.cursor_type != "row":
            super().action_cursor_right()
            return
        later = [x for x in self._column_starts() if x > self.scroll_x]
        self.scroll_to(x=min(later[0] if later else self.max_scroll_x, self.max_scroll_x),
                       animate=False)

    def action_cursor_left(self) -> None:
        """Left: back to the start of the column before."""
        if self.cursor_type != "row":
            super().action_cursor_left()
            return
        self.scroll_to(x=max((x for x in self._column_starts() if x < self.scroll_x),
                             default=0), animate=False)

    def _column_starts(self) -> list[int]:
        starts, x = [], 0
        for column in self.ordered_columns:
            starts.append(x)
            x += column.get_render_width(self)
        return starts

    def _ensure_columns(self) -> None:
        if not self.columns:
            for key, label in self.COLUMNS:
                self.add_column(label, key=key)

    def put_row(self, key: str, cells: tuple[Text | str, ...]) -> None:
        """Add the row, or update only the cells that changed."""
        self._ensure_columns()
        old = self._last.get(key)
        if old == cells:
            return
        self._last[key] = cells
        if old is None:
            self.add_row(*cells, key=key)
            return
        for (col, _), value, before in zip(self.COLUMNS, cells, old, strict=True):
            if value != before:
                self.update_cell(key, col, value, update_width=True)

    def drop_row(self, key: str) -> None:
        if self._last.pop(key, None) is not None:
            self.remove_row(key)

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value


class NodesTable(KeyedTable):
    """Columns by priority: what an 80-column terminal must show comes first."""

    COLUMNS = (("node", "Node"), ("state", "State"), ("risk", "Risk"), ("mem", "Used/Avail"),
               ("psi", "PSI"), ("busy", "Busy with"), ("problem", "Problem"), ("role", "Role"),
               ("kernel", "Kernel"))
    SHRINK = ("busy", "problem")

    def __init__(self, config: Config, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.config = config
        self._aging: dict[str, tuple[NodeSnapshot, ThrashVerdict | None, str,
                                     Sequence[Finding]]] = {}
        """The rows that show a stale age, as last shown (repainted as it grows)."""

    def on_mount(self) -> None:
        for name in self.config.nodes:
            self.show(NodeSnapshot(name, NodeState.UNKNOWN, 0.0, error="not polled"), None, "")
        self.set_interval(AGE_EVERY_S, self._age, name="stale ages")

    def _age(self) -> None:
        for row in list(self._aging.values()):
            self.show(*row)

    def show(self, snap: NodeSnapshot, verdict: ThrashVerdict | None, busy: str,
             findings: Sequence[Finding] = ()) -> None:
        """``findings``: what is wrong with the node (core/nodehealth): a ``!`` by
        its name (red when a serve would be refused), the first in Problem."""
        cfg = self.config.nodes[snap.node]
        guards = self.config.guards
        role = cfg.role + ("*" if snap.node in guards.protected_nodes else "")
        probe = snap.probe
        kernel: Text | str = "—"
        mem, psi = "—", "—"
        if probe is not None:
            if probe.kernel:
                kernel = kernel_cell(probe.kernel, guards)
            if probe.meminfo:
                m = probe.meminfo
                mem = f"{m.used_kib / KIB_PER_GIB:3.0f}/{m.available_kib / KIB_PER_GIB:5.1f}"
            if probe.psi and probe.psi.full:
                psi = f"{probe.psi.full.avg10:4.1f}"
        state = Text(STATE_WORDS[snap.state], style=STATE_STYLES[snap.state])
        # the age of the last good sample (issue 17), now: the console's clock,
        # a replay's (the snapshot's own time would freeze it)
        now = cast("SparkTUI", self.app).now()
        age = stale_age(snap.last_ok_at, now, self.config.console.poll_interval_s)
        if age is not None:
            state.append(f" {format_duration(age)}", style="dim")
            self._aging[snap.node] = (snap, verdict, busy, findings)
        else:
            self._aging.pop(snap.node, None)
        problems = [f for f in findings if f.check != "online"]  # State says that
        node: Text | str = snap.node
        problem: Text | str = ""
        if problems:
            style = "bold red" if any(f.blocks_serve for f in problems) else "yellow"
            node = Text(snap.node)
            node.append(" !", style=style)
            problem = Text(problems[0].summary + (f" (+{len(problems) - 1})"
                                                  if len(problems) > 1 else ""), style=style)
        self.put_row(snap.node, (node, state, risk_cell(verdict), mem, psi,
                                 busy or "free", problem, role, kernel))


def kernel_cell(kernel: str, guards: GuardConfig) -> Text:
    """The verdict before the version: a narrowed column cuts the version."""
    short = kernel.removesuffix("-nvidia")
    if known_bad(guards, kernel) is not None:
        return Text(f"BAD {short}", style="bold red")
    if off_pin(guards, kernel):
        return Text(f"≠pin {short}", style="yellow")
    return Text(short)


def risk_cell(verdict: ThrashVerdict | None) -> Text:
    if verdict is None:
        return Text("—")
    style = {ThrashLevel.OK: "", ThrashLevel.PRESSURE: "yellow",
             ThrashLevel.SUSPECTED: "bold yellow", ThrashLevel.THRASH: "bold red reverse"}
    return Text(RISK_WORDS[verdict.level], style=style[verdict.level])


class LanesTable(KeyedTable):
    """Columns by priority (state, progress, health first); the rest scroll
    sideways and are all in the lane's details (enter)."""

    COLUMNS = (("lane", "Lane"), ("phase", "Phase"), ("progress", "Progress / ETA"),
               ("health", "Health"), ("tps", "tok/s"), ("kv", "KV tokens"), ("conc", "Conc"),
               ("up", "Up"), ("cluster", "Cluster"))

    def show(self, lane: LaneView, activity: str = "", oom: str = "") -> None:
        """``oom``: the node of this lane predicted to run out of memory, if any."""
        name = lane.name + (" *" if lane.protected else "")
        self.put_row(lane.name, (
            name, phase_cell(lane), progress_cell(lane, activity, oom),
            lane.health + (f" {format_duration(lane.stale_s)}" if lane.stale_s else ""),
            f"{lane.decode_tps:.1f}" if lane.decode_tps is not None else "—",
            f"{lane.kv_tokens:,}" if lane.kv_tokens else "—",
            f"{lane.concurrency:.2f}x" if lane.concurrency else "—",
            format_duration(lane.uptime_s) if lane.uptime_s is not None else "—",
            lane.cluster,
        ))


GATE_STYLES = {"qualifying": "dim", "qualified": "bold green", "garbled": "bold red reverse",
               "slow": "bold yellow"}
"""A serving lane's Phase cell shows its quality gate once one ran (issue 14)."""
LOUD = ("failed", "stalled", "unresponsive", "garbled", "slow")


def phase_cell(lane: LaneView) -> Text:
    """The boot phase; once serving, the gate's state (a gate that could not
    run leaves ``serving``: its reason is in the Progress cell)."""
    phase = lane.gate if lane.phase == "serving" and lane.gate in GATE_STYLES else lane.phase
    style = GATE_STYLES.get(phase) or {
        "serving": "green", "failed": "bold red reverse", "unresponsive": "bold red reverse",
        "stalled": "bold yellow"}.get(phase, "")
    return Text(phase.upper() if phase in LOUD else phase, style=style)


GATE_CELL = 34
"""Characters of a verdict (the gate's, a failure's) in the Progress cell (the
rest in details)."""
SPAN = re.compile(r"«[^»]*» for «[^»]*»")


def gate_brief(lane: LaneView) -> str:
    """The gate in a few words: its worst quoted span when garbled, else its
    verdict without the ``quality gate`` head."""
    if not lane.gate_text or lane.gate == "qualifying":
        return ""
    span = SPAN.search(lane.gate_text)
    text = span.group(0) if span else lane.gate_text.removeprefix("quality gate").lstrip(": ")
    return cut(text, GATE_CELL)


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def cut_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its last words kept: an error's verdict
    is often its end (``rank 0: RPC call to sa… timed out.``)."""
    if len(text) <= width:
        return text
    tail = text[-(width // 3):]
    if " " in tail and not text.endswith(" " + tail):
        tail = tail.split(" ", 1)[1]
    return text[:width - 2 - len(tail)].rstrip() + "… " + tail


def progress_cell(lane: LaneView, activity: str = "", oom: str = "") -> Text | str:
    """``12/40 30% ETA 13m`` while loading (``47/94G 50%`` from a byte bar or
    the memory become resident; ``OOM dgx7`` in place of the ETA
    when a rank is predicted to run out); else the running workflow's step;
    a failed lane's failure (its gate's verdict, from before, is stale); or
    the quality gate's verdict."""
    load = lane.load
    if load is not None:
        text = Text(f"{load.amount()} {load.fraction:.0%}")
        if oom:
            text.append(f" OOM {oom}", style="bold red reverse")
        elif load.eta_s is not None:
            text.append(f" ETA {format_duration(load.eta_s)}")
        return text
    if activity:
        return activity
    if lane.phase == "failed" and lane.failure_brief:
        return Text(cut_middle(lane.failure_brief, GATE_CELL), style="bold red")
    if brief := gate_brief(lane):
        return Text(brief, style={"garbled": "bold red", "slow": "yellow",
                                  "failed": "yellow"}.get(lane.gate, ""))
    return "—"
