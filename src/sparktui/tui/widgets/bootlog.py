"""The boot log of one lane rank: a bounded buffer rendered only for the
visible window (the Line API), with follow/pause, search, severity and text
filters, wrap, and fatal lines marked in words as well as colour."""

from __future__ import annotations

from collections import deque
from itertools import count
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from sparktui.core.logsig import Severity, classify, clean
from sparktui.watch.follower import LogLine

MAX_LINES = 5000
STRIP_CACHE = 1024
GUTTER = 6
"""``r12 ! ``: rank and a severity mark, so fatal lines read without colour."""
MARKS = {Severity.FATAL: "!", Severity.WARNING: "w", Severity.PROGRESS: "·"}
LEVELS: tuple[tuple[str, Severity | None], ...] = (
    ("all", None), ("warn+", Severity.WARNING), ("fatal", Severity.FATAL))

_FATAL = Style(bold=True, reverse=True)
_WARN = Style(bold=True)
_MATCH = Style(reverse=True, underline=True)


class Entry:
    """One line; its severity is classified on first use (render or filter),
    so lines that scroll past unseen cost no regex."""

    __slots__ = ("_severity", "rank", "seq", "text")
    _UNSET: ClassVar[object] = object()

    def __init__(self, seq: int, rank: int, text: str) -> None:
        self.seq = seq
        self.rank = rank
        self.text = text
        self._severity: object = Entry._UNSET

    @property
    def severity(self) -> Severity | None:
        if self._severity is Entry._UNSET:
            ev = classify(self.text)
            self._severity = ev.severity if ev else None
        return self._severity  # type: ignore[return-value]


class BootLog(ScrollView, can_focus=True):
    """Holds at most ``max_lines`` lines; renders only the rows on screen."""

    follow: reactive[bool] = reactive(True)
    wrap: reactive[bool] = reactive(False)
    level: reactive[int] = reactive(0)
    text_filter: reactive[str] = reactive("")
    search: reactive[str] = reactive("")

    def __init__(self, *, max_lines: int = MAX_LINES, id: str | None = None) -> None:
        super().__init__(id=id)
        self._seq = count()
        self.entries: deque[Entry] = deque(maxlen=max_lines)
        self._rows: deque[tuple[Entry, int, int]] = deque()
        self._max_width = 0
        self._strips: dict[tuple[int, int, int, str, bool], Strip] = {}
        """Rendered rows by line and search: following a log re-renders nothing
        that only moved up (cleared whole when full: cheaper than LRU upkeep)."""
        self.match_row: int | None = None
        """The row the last search landed on (drawn with a ``>`` in the gutter)."""
        self.paused_render = False
        """Set while the pane is hidden or under a modal: lines are kept, no paint."""

    # -- feeding -------------------------------------------------------------

    def clear_lines(self) -> None:
        self.entries.clear()
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
        wrap = self.wrap
        width = max(10, self.scrollable_content_region.width - GUTTER)
        rows: list[tuple[Entry, int, int]] = []
        widest = self._max_width
        for entry in entries:
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
        self.match_row = None
        self._max_width = 0
        self._rows = deque(self._layout(self.entries))
        self._resize()
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()

    def _resize(self) -> None:
        width = self.scrollable_content_region.width if self.wrap else self._max_width
        self.virtual_size = Size(width, len(self._rows))

    def watch_wrap(self) -> None:
        self._rebuild()

    def watch_level(self) -> None:
        self._rebuild()

    def watch_text_filter(self) -> None:
        self._rebuild()

    def watch_search(self) -> None:
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
            if needle in entry.text[a:b].lower():
                self.follow = False
                self.match_row = i % n
                if not self.scroll_y <= self.match_row < self.scroll_y + self.size.height:
                    self.scroll_to(y=self.match_row, animate=False, immediate=True)
                self.refresh()
                return True
        return False

    # -- rendering -----------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= len(self._rows):
            return Strip.blank(width, base)
        entry, a, b = self._rows[index]
        key = (entry.seq, a, b, self.search, index == self.match_row)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._render_row(entry, a, b, index == self.match_row)
            if len(self._strips) >= STRIP_CACHE:
                self._strips.clear()
            self._strips[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)

    def _render_row(self, entry: Entry, a: int, b: int, current: bool) -> Strip:
        if a == 0:
            mark = MARKS.get(entry.severity, " ") if entry.severity is not None else " "
            gutter = f"r{entry.rank:<2} {mark}{'>' if current else ' '}"[:GUTTER].ljust(GUTTER)
        else:
            gutter = " " * (GUTTER - 1) + (">" if current else " ")
        body = Text(entry.text[a:b])
        if entry.severity is Severity.FATAL:
            body.stylize(_FATAL + Style(color="red"))
        elif entry.severity is Severity.WARNING:
            body.stylize(_WARN + Style(color="yellow"))
        if self.search:
            body.highlight_words([self.search], _MATCH, case_sensitive=False)
        gutter_text = Text(gutter, style=Style(dim=True))
        segments = [*gutter_text.render(self.app.console), *body.render(self.app.console)]
        return Strip([s for s in segments if s.text != "\n"] or [Segment("")])
