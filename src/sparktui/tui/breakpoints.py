"""A screen's breakpoint classes (``-short`` / ``-tall``, the main screen's
``-narrow`` / ``-wide``) set as it is shown. Textual sets them when the
screen's first Resize event is handled, after its first layout: on a busy
console that event waited behind the rest and a modal was laid out for a tall
terminal meanwhile, its buttons below the fold for ~1 s (issue 28 item 7)."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.screen import Screen


def fit_breakpoints(app: App[Any], screen: Screen[Any]) -> None:
    """Give ``screen`` the classes its breakpoints (or the app's) name for the
    terminal's size now, as `Screen._on_resize` will."""
    width, height = app.size
    if not (width and height):
        return
    pairs = ((width, app.HORIZONTAL_BREAKPOINTS if screen.HORIZONTAL_BREAKPOINTS is None
              else screen.HORIZONTAL_BREAKPOINTS),
             (height, app.VERTICAL_BREAKPOINTS if screen.VERTICAL_BREAKPOINTS is None
              else screen.VERTICAL_BREAKPOINTS))
    classes: dict[str, bool] = {}
    for size, breakpoints in pairs:
        names = [name for _, name in breakpoints or ()]
        reached = [name for at, name in sorted(breakpoints or ()) if size >= at]
        classes.update({name: bool(reached) and name == reached[-1] for name in names})
    if classes:
        screen.update_classes(classes, animate=False)
