"""The boot log of one lane rank: a bounded buffer rendered only for the
visible window (the Line API), with follow/pause, search, severity and text
filters, wrap, and fatal lines marked in words as well as colour.

The console's own probe requests (``GET /health``, ``/metrics``,
``/v1/models`` answered 200) are folded away unless asked for: once a lane
serves they would be every visible line. A line cut at the pane's right edge
ends in a marker; a search scrolls sideways to its match, and wrapping or
filtering keeps the match in view."""

from __future__ import annotations

import re
from collections import deque
from itertools import count
from typing import ClassVar

from rich.control import strip_control_codes
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from sparktui.core.logsig import Severity, classify, clean
from sparktui.tui.widgets.pane import RestyledWhileShown
from sparktui.watch.follower import LogLine

MAX_LINES = 5000
ROW_CACHE = 1024
GUTTER = 6
"""``r12 ! ``: rank and a severity mark, so fatal lines read without colour."""
MARKS = {Severity.FATAL: "!", Severity.WARNING: "w", Severity.PROGRESS: "·"}
LEVELS: tuple[tuple[str, Severity | None], ...] = (
    ("all", None), ("warn+", Severity.WARNING), ("fatal", Severity.FATAL))

PROBE_ACCESS = re.compile(r'"(?:GET /(?:health|metrics|v1/models(?:\?sparktui=\w+)?)'
                          r'|POST /v1/(?:chat/)?completions) HTTP/[\d.]+" 200\b')
"""An access-log line of the requests the console itself sends every few
seconds: its polls (adapters/engine_http.py; the model list's carries the
console's tag, ``?sparktui=TAG``) and its serving canary's chat
request (watch/canary.py), which an access line cannot tell from a client's,
so every successful completion request folds with them (``h`` shows them);
any other status is news and stays."""
CUT = "›"
"""Drawn in the last column of a line that goes on past the pane's edge."""
EMPTY = "no lines at this level / filter (l: next level, t: change the filter)"

_FATAL = Style(bold=True, reverse=True)
_WARN = Style(bold=True)
_MATCH = Style(reverse=True, underline=True)
_CUT = Style(bold=True, reverse=True)
SEVERITY_STYLE = {Severity.FATAL: _FATAL + Style(color="red"),
                  Severity.WARNING: _WARN + Style(color="yellow")}


class Entry:
    """One line; its severity is classified on first use (render or filter),
    so lines that scroll past unseen cost no regex."""

    __slots__ = ("_severity", "probe", "rank", "seq", "text")
    _UNSET: ClassVar[object] = object()

    def __init__(self, seq: int, rank: int, text: str) -> None:
        self.seq = seq
        self.rank = rank
        self.text = text
        self._severity: object = Entry._UNSET
        self.probe = "HTTP/" in text and PROBE_ACCESS.search(text) is not None

    @property
    def severity(self) -> Severity | None:
        if self._severity is Entry._UNSET:
            ev = classify(self.text)
            self._severity = ev.severity if ev else None
        return self._severity  # type: ignore[return-value]


class BootLog(RestyledWhileShown, ScrollView, can_focus=True):
    """Holds at most ``max_lines`` lines; renders only the rows on screen."""

    follow: reactive[bool] = reactive(True)
    wrap: reactive[bool] = reactive(False)
    level: reactive[int] = reactive(0)
    text_filter: reactive[str] = reactive("")
    search: reactive[str] = reactive("")
    show_probes: reactive[bool] = reactive(False)

    def __init__(self, *, max_lines: int = MAX_LINES, id: str | None = None) -> None:
        super().__init__(id=id)
        self._seq = count()
        self.entries: deque[Entry] = deque(maxlen=max_lines)
        self._rows: deque[tuple[Entry, int, int]] = deque()
        self._max_width = 0
        self._row_segments: dict[tuple[int, int, int, str, bool], list[Segment]] = {}
        """Rendered rows by line and search: following a log re-renders nothing
        that only moved up (cleared whole when full: cheaper than LRU upkeep)."""
        self._shown: dict[tuple[tuple[int, int, int, str, bool], int, Style, int], Strip] = {}
        """The same rows as painted: at the pane's width and sideways scroll, in
        its style."""
        self._base: Style | None = None
        self.match_row: int | None = None
        """The row the last search landed on (drawn with a ``>`` in the gutter)."""
        self.paused_render = False
        """Set while the pane is hidden or under a modal: lines are kept, no paint."""
        self.folded = 0
        """Probe access lines hidden (the banner says how many)."""

    # -- feeding -------------------------------------------------------------

    def clear_lines(self) -> None:
        """Another rank's log: from its first column (a search's sideways
        scroll belonged to the last one's line)."""
        self.entries.clear()
        self.scroll_to(x=0, animate=False, immediate=True)
        self._rebuild()

    def add_lines(self, lines: list[LogLine] | tuple[LogLine, ...]) -> None:
        maxlen = self.entries.maxlen or len(lines)
        seq = self._seq
        new = [Entry(next(seq), line.rank, clean(line.text)) for line in lines[-maxlen:]]
        self.entries.extend(new)
        first = self.entries[0].seq if self.entries else 0
        dropped = 0
        while self._rows and self._rows[0][0].seq < first:
            self._rows.popleft()
            dropped += 1
        if dropped and self.match_row is not None:
            self.match_row = self.match_row - dropped if self.match_row >= dropped else None
        self._rows.extend(self._layout(new))
        self._resize()
        if dropped and not self.follow:
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        if not self.paused_render:
            self.refresh()

    # -- filters and layout --------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def level_name(self) -> str:
        return LEVELS[self.level][0]

    def cycle_level(self) -> None:
        self.level = (self.level + 1) % len(LEVELS)

    def _layout(self, entries: list[Entry] | deque[Entry]) -> list[tuple[Entry, int, int]]:
        """The rows of the entries that pass the filters (wrapped when on).
        Reactives and the width are read once per batch, not per line."""
        floor = LEVELS[self.level][1]
        needle = self.text_filter.lower()
        probes = self.show_probes
        wrap = self.wrap
        # the vertical scrollbar's column is kept free: it appears once the
        # rows overflow, after they were laid out, and a row laid out without
        # it lost two characters at every fold (one under the bar, one to ›)
        width = max(10, self.size.width - self.styles.scrollbar_size_vertical - GUTTER)
        rows: list[tuple[Entry, int, int]] = []
        widest = self._max_width
        for entry in entries:
            if entry.probe and not probes:
                self.folded += 1
                continue
            if floor is not None:
                sev = entry.severity
                if sev is None or sev < floor:
                    continue
            if needle and needle not in entry.text.lower():
                continue
            n = len(entry.text)
            if not wrap or n <= width:
                widest = max(widest, n + GUTTER)
                rows.append((entry, 0, n))
            else:
                rows.extend((entry, i, min(n, i + width)) for i in range(0, n, width))
        self._max_width = widest
        return rows

    def _rebuild(self) -> None:
        """Lay every line out again (wrap, filters); the search match, if any,
        stays the current match and in view."""
        at = self._match_position()
        self.match_row = None
        self._max_width = 0
        self.folded = 0
        self._rows = deque(self._layout(self.entries))
        self._resize()
        if at is not None:
            self._restore_match(*at)
        elif self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()

    def _match_position(self) -> tuple[int, int] | None:
        """(line seq, character offset in the line) of the current match."""
        if self.match_row is None or self.match_row >= len(self._rows):
            return None
        entry, a, _ = self._rows[self.match_row]
        found = entry.text.lower().find(self.search.lower(), a) if self.search else -1
        return entry.seq, found if found >= 0 else a

    def _restore_match(self, seq: int, offset: int) -> None:
        for i, (entry, a, b) in enumerate(self._rows):
            if entry.seq == seq and (a <= offset < b or (b == len(entry.text) and offset >= a)):
                self.match_row = i
                self._show_match(offset - a)
                return

    def _resize(self) -> None:
        width = self.scrollable_content_region.width if self.wrap else self._max_width
        self.virtual_size = Size(width, len(self._rows))

    def watch_wrap(self) -> None:
        self._rebuild()

    def watch_level(self) -> None:
        self._rebuild()

    def watch_text_filter(self) -> None:
        self._rebuild()

    def watch_show_probes(self) -> None:
        self._rebuild()

    def watch_search(self, search: str) -> None:
        if not search:  # the sideways scroll to the match goes with it
            self.match_row = None
            self.scroll_to(x=0, animate=False, immediate=True)
        self.refresh()

    class FollowChanged(Message):
        """Following started or paused (the banner says which)."""

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.post_message(self.FollowChanged())

    def action_scroll_home(self) -> None:
        """Home: the first line, and following pauses (or it would jump back)."""
        self.follow = False
        self.scroll_to(x=0, y=0, animate=False, immediate=True)

    def action_scroll_end(self) -> None:
        """End: the newest line, following again."""
        self.scroll_to(x=0, animate=False, immediate=True)
        self.follow = True

    def on_resize(self) -> None:
        if self.wrap:
            self._rebuild()

    def resume_render(self) -> None:
        self.paused_render = False
        self.refresh()

    # -- search --------------------------------------------------------------

    def find_next(self, backwards: bool = False) -> bool:
        """Scroll to the next row holding the search text; pauses following."""
        if not self.search or not self._rows:
            return False
        needle = self.search.lower()
        n = len(self._rows)
        start = (self.match_row if self.match_row is not None else int(self.scroll_y) - 1)
        start += 0 if backwards else 1
        order = (range(start - 1, start - 1 - n, -1) if backwards
                 else range(start, start + n))
        for i in order:
            entry, a, b = self._rows[i % n]
            column = entry.text[a:b].lower().find(needle)
            if column >= 0:
                self.follow = False
                self.match_row = i % n
                self._show_match(column)
                self.refresh()
                return True
        return False

    def _show_match(self, column: int) -> None:
        """Scroll so the match row is on screen and its text is not cut off
        at the right (or hidden to the left)."""
        assert self.match_row is not None
        if not self.scroll_y <= self.match_row < self.scroll_y + self.size.height:
            self.scroll_to(y=self.match_row, animate=False, immediate=True)
        text_width = self.scrollable_content_region.width - GUTTER - 1
        end = column + len(self.search)
        if self.wrap or text_width <= 0:
            return
        if column < self.scroll_x or end > self.scroll_x + text_width:
            x = 0 if end <= text_width else max(0, column - text_width // 3)
            self.scroll_to(x=x, animate=False, immediate=True)

    # -- rendering -----------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        """The base style once per paint, not per line: it walks every
        ancestor's styles, and following a flood repaints every row each frame."""
        self._base = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._base = None

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self._base or self.rich_style
        if index >= len(self._rows):
            if index == 0 and self.entries:
                return Strip([Segment(EMPTY[:width].ljust(width), base + Style(dim=True))])
            return Strip.blank(width, base)
        entry, a, b = self._rows[index]
        key = (entry.seq, a, b, self.search, index == self.match_row)
        shown_key = (key, width, base, scroll_x)
        shown = self._shown.get(shown_key)
        if shown is None:
            row = self._row_segments.get(key)
            if row is None:
                row = self._render_row(entry, a, b, index == self.match_row)
                if len(self._row_segments) >= ROW_CACHE:
                    self._row_segments.clear()
                self._row_segments[key] = row
            if len(self._shown) >= ROW_CACHE:
                self._shown.clear()
            shown = self._shown[shown_key] = fit_row(row, width, base, scroll_x)
        return shown

    def _render_row(self, entry: Entry, a: int, b: int, current: bool) -> list[Segment]:
        """Segments built directly (a rich Text rendered through the console
        cost ~10x as much, for every new row of a flood)."""
        if a == 0:
            mark = MARKS.get(entry.severity, " ") if entry.severity is not None else " "
            gutter = f"r{entry.rank:<2} {mark}{'>' if current else ' '}"[:GUTTER].ljust(GUTTER)
        else:
            gutter = " " * (GUTTER - 1) + (">" if current else " ")
        body = strip_control_codes(entry.text[a:b])
        style = SEVERITY_STYLE.get(entry.severity) if entry.severity is not None else None
        segments = [Segment(gutter)]  # plain, as the rich Text without spans drew it
        at = 0
        if self.search:
            matched = style + _MATCH if style else _MATCH
            for found in re.finditer(re.escape(self.search), body, flags=re.IGNORECASE):
                start, end = found.span()
                if start == end:
                    continue
                if start > at:
                    segments.append(Segment(body[at:start], style))
                segments.append(Segment(body[start:end], matched))
                at = end
        if at < len(body):
            segments.append(Segment(body[at:], style))
        return segments


def fit_row(row: list[Segment], width: int, base: Style, scroll_x: int) -> Strip:
    """A row as painted: the gutter, the text scrolled ``scroll_x`` sideways
    and cut at the pane's edge (a marker in the last column when it goes on),
    padded to ``width``, in the pane's style under the row's own. A new row of
    a flooding log took seven Strips (crop, crop, join, pad, style), each with
    four caches of its own: most of the cost of showing the log pane, and of
    the collector's passes. Printable ASCII (one cell a character) is cut by
    slicing; anything else goes through Strip's cell-aware crops."""
    text_width = width - GUTTER
    if text_width > 1 and all(seg.text.isascii() and seg.text.isprintable() for seg in row):
        return _fit_ascii(row, width, base, scroll_x)
    return _fit_cells(row, width, base, scroll_x)


def _fit_cells(row: list[Segment], width: int, base: Style, scroll_x: int) -> Strip:
    strip = Strip(row)
    if scroll_x == 0 and strip.cell_length <= width:
        return strip.extend_cell_length(width, base).apply_style(base)
    # the gutter stays put; only the text scrolls sideways
    text_width = width - GUTTER
    parts = [strip.crop(0, GUTTER)]
    start = GUTTER + scroll_x
    if strip.cell_length > start + text_width and text_width > 1:
        parts += [strip.crop(start, start + text_width - 1), Strip([Segment(CUT, _CUT)], 1)]
    else:
        parts.append(strip.crop(start, start + text_width))
    return Strip.join(parts).extend_cell_length(width, base).apply_style(base)


def _fit_ascii(row: list[Segment], width: int, base: Style, scroll_x: int) -> Strip:
    length = sum(len(seg.text) for seg in row)
    if scroll_x == 0 and length <= width:
        out = list(row)
    else:
        text_width = width - GUTTER
        start = GUTTER + scroll_x
        cut = length > start + text_width
        out = _slice(row, 0, GUTTER) + _slice(row, start, start + text_width - cut)
        if cut:
            out.append(Segment(CUT, _CUT))
    painted = [Segment(text, base + style) for text, style, _ in out] if base else out
    drawn = sum(len(seg.text) for seg in out)
    if drawn < width:
        painted.append(Segment(" " * (width - drawn), base))
    return Strip(painted, width)


def _slice(row: list[Segment], start: int, end: int) -> list[Segment]:
    """The characters ``start:end`` of the row, segment styles kept."""
    out: list[Segment] = []
    at = 0
    for text, style, _ in row:
        a, b = max(start - at, 0), min(end - at, len(text))
        if a < b:
            out.append(Segment(text[a:b], style))
        at += len(text)
        if at >= end:
            break
    return out
