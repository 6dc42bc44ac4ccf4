"""The running app's screen as plain text: what an operator without colour sees."""

from __future__ import annotations

import html
import io
import re

from rich.console import Console
from textual.app import App


def screen_text(app: App[object]) -> str:
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system=None, record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text()


def online_rows(text: str) -> int:
    """Rows of the Nodes table that read "online"."""
    return sum(1 for line in text.splitlines()
               if line.lstrip("│ ").startswith("dgx") and " online " in line)


SVG_TEXT = re.compile(r'<text class="terminal-[^"]*r\d+"[^>]*>(.*?)</text>')


def svg_text(svg: str) -> str:
    """The characters a screenshot SVG (`App.export_screenshot`) shows, in order."""
    return html.unescape("".join(SVG_TEXT.findall(svg))).replace("\xa0", " ")


SVG_CELL = re.compile(r'<text class="[^"]*" x="([0-9.]+)" y="[0-9.]+" textLength="[0-9.]+"'
                      r' clip-path="url\(#[^)]*line-(\d+)\)">([^<]*)</text>')
CELL_PX = 12.2
"""Width of one cell in Rich's SVG export."""


def svg_rows(svg: str) -> list[str]:
    """A screenshot SVG's rows of text, each character in its column."""
    rows: dict[int, dict[int, str]] = {}
    for x, line, text in SVG_CELL.findall(svg):
        row = rows.setdefault(int(line), {})
        col = round(float(x) / CELL_PX)
        for i, ch in enumerate(html.unescape(text).replace("\xa0", " ")):
            row[col + i] = ch
    return ["".join(r.get(i, " ") for i in range(max(r) + 1)).rstrip()
            for _, r in sorted(rows.items())]
