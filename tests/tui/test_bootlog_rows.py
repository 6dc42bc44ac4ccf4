"""A boot-log row as painted (widgets/bootlog.fit_row): printable ASCII is cut
by slicing; it must paint exactly what Strip's cell-aware crops paint, at any
width and sideways scroll, with the search's styled spans and the cut marker."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.segment import Segment
from rich.style import Style

from sparktui.tui.widgets.bootlog import GUTTER, _fit_ascii, _fit_cells, fit_row

STYLES = [None, Style(bold=True), Style(color="red", reverse=True),
          Style(reverse=True, underline=True)]
ascii_text = st.text(alphabet=string.printable[:95], min_size=1, max_size=40)
rows = st.builds(
    lambda gutter, body: [Segment(gutter)] + [Segment(t, s) for t, s in body],
    st.text(alphabet=string.printable[:95], min_size=GUTTER, max_size=GUTTER),
    st.lists(st.tuples(ascii_text, st.sampled_from(STYLES)), max_size=6))
bases = st.sampled_from([Style(), Style(color="white", bgcolor="black"), Style(dim=True)])


@settings(max_examples=500)
@given(rows, st.integers(GUTTER + 2, 120), bases, st.integers(0, 150))
def test_ascii_rows_paint_as_the_cell_aware_crops_paint(
        row: list[Segment], width: int, base: Style, scroll_x: int) -> None:
    fast = _fit_ascii(row, width, base, scroll_x)
    assert fast == _fit_cells(row, width, base, scroll_x)
    assert fast.cell_length == width == sum(len(seg.text) for seg in fast)


def test_wide_characters_take_the_cell_aware_path() -> None:
    row = [Segment("r0  ! "), Segment("モデル" * 20, Style(bold=True))]
    painted = fit_row(row, 40, Style(), 0)
    assert painted == _fit_cells(row, 40, Style(), 0)
    assert painted.cell_length == 40 and painted.text.endswith("›")
