"""A screen's breakpoint classes (``-short`` / ``-tall``, the main screen's
``-narrow`` / ``-wide``) set as it is shown. Textual sets them when the
screen's first Resize event is handled, after its first layout: on a busy
console that event waited behind the rest and a modal was laid out for a tall
terminal meanwhile, its buttons below the fold for ~1 s (issue 28 item 7).

A workaround of Textual 8.2.8's internals (docs/UPSTREAM.md, "A pushed
screen's first layout has no breakpoint classes"): :func:`breakpoint_classes`
is what `Screen._on_resize` computes with `Screen._get_breakpoint_classes`;
tests/tui/test_breakpoints_textual.py holds it to Textual's own and fails when
either changes."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.screen import Screen


def breakpoint_classes(size: tuple[int, int], app: App[Any], screen: Screen[Any]
                       ) -> dict[str, bool]:
    """Each breakpoint class of ``screen`` (its own breakpoints, else the app's)
    and whether a terminal of ``size`` (width, height) gives it: per dimension,
    the class of the highest breakpoint the size reaches; a class named in
    both lists is on when either dimension gives it."""
    width, height = size
    pairs = ((width, (app.HORIZONTAL_BREAKPOINTS if screen.HORIZONTAL_BREAKPOINTS is None
                      else screen.HORIZONTAL_BREAKPOINTS) or []),
             (height, (app.VERTICAL_BREAKPOINTS if screen.VERTICAL_BREAKPOINTS is None
                       else screen.VERTICAL_BREAKPOINTS) or []))
    classes = {name: False for _, breakpoints in pairs for _, name in breakpoints}
    for dimension, breakpoints in pairs:
        reached = [name for at, name in sorted(breakpoints) if dimension >= at]
        if reached:
            classes[reached[-1]] = True
    return classes


def fit_breakpoints(app: App[Any], screen: Screen[Any]) -> None:
    """Give ``screen`` the classes its breakpoints name for the terminal's size
    now, as `Screen._on_resize` will."""
    width, height = app.size
    if width and height and (classes := breakpoint_classes((width, height), app, screen)):
        screen.update_classes(classes, animate=False)
