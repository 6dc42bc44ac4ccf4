"""tui/breakpoints.py copies what Textual 8.2.8's `Screen._on_resize` does with
`Screen._get_breakpoint_classes` (docs/UPSTREAM.md, "A pushed screen's first
layout has no breakpoint classes"). These tests fail when Textual changes: the
classes it computes are held to Textual's own, run on the same screen, over
sizes and breakpoint lists; and the two methods' source is the one read."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Iterator

import pytest
import textual
from hypothesis import given, settings
from hypothesis import strategies as st
from textual._context import active_app
from textual.app import App
from textual.events import Resize
from textual.geometry import Size
from textual.screen import Screen

from sparktui.tui.app import SparkTUI
from sparktui.tui.breakpoints import breakpoint_classes
from sparktui.tui.screens.main import MainScreen

TEXTUAL_READ = "8.2.8"
SOURCE_READ = {"_on_resize": "ba5f7fb1b5a3327d", "_get_breakpoint_classes": "27b85b46dd8a204b"}
"""sha256 (16 hex digits) of each method's source in Textual 8.2.8."""


def source_hash(name: str) -> str:
    return hashlib.sha256(inspect.getsource(getattr(Screen, name)).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def app() -> Iterator[App[None]]:
    """An app as the active one (a screen reads its breakpoints and
    background screens through it); never run."""
    app: App[None] = App()
    token = active_app.set(app)
    yield app
    active_app.reset(token)


def textual_classes(app: App[None], screen: Screen[None], size: tuple[int, int]
                    ) -> frozenset[str]:
    """The classes Textual's own `Screen._on_resize` leaves on ``screen``."""
    screen.set_classes("")
    asyncio.run(screen._on_resize(Resize(Size(*size), Size(*size))))
    return screen.classes


def ours(app: App[None], screen: Screen[None], size: tuple[int, int]) -> frozenset[str]:
    return frozenset(name for name, on in breakpoint_classes(size, app, screen).items() if on)


BREAKPOINTS = st.lists(st.tuples(st.integers(0, 300), st.sampled_from(
    ["-a", "-b", "-c", "-narrow", "-wide", "-short", "-tall"])), max_size=5)


@given(horizontal=BREAKPOINTS | st.none(), vertical=BREAKPOINTS | st.none(),
       app_horizontal=BREAKPOINTS, app_vertical=BREAKPOINTS,
       width=st.integers(0, 320), height=st.integers(0, 320))
@settings(max_examples=400, deadline=None)
def test_the_classes_are_textuals_for_any_breakpoints_and_size(
        app: App[None], horizontal: list[tuple[int, str]] | None,
        vertical: list[tuple[int, str]] | None, app_horizontal: list[tuple[int, str]],
        app_vertical: list[tuple[int, str]], width: int, height: int) -> None:
    """Both dimensions, a screen's own breakpoints or the app's (None), ties
    and a class named in both lists."""
    screen: Screen[None] = Screen()
    screen.HORIZONTAL_BREAKPOINTS, screen.VERTICAL_BREAKPOINTS = horizontal, vertical
    app.HORIZONTAL_BREAKPOINTS, app.VERTICAL_BREAKPOINTS = app_horizontal, app_vertical
    try:
        assert ours(app, screen, (width, height)) == textual_classes(app, screen, (width, height))
    finally:
        app.HORIZONTAL_BREAKPOINTS = app.VERTICAL_BREAKPOINTS = []


@pytest.mark.parametrize("screen_type", [MainScreen, Screen])
def test_the_consoles_own_breakpoints_over_terminal_sizes(
        app: App[None], screen_type: type[Screen[None]]) -> None:
    """The main screen's -narrow/-wide and -short/-tall, a modal's (the app's
    -short/-tall), at every size from 40x10 to 250x80 by steps that cross
    each breakpoint."""
    screen = screen_type()
    app.VERTICAL_BREAKPOINTS = SparkTUI.VERTICAL_BREAKPOINTS
    try:
        for width in [*range(40, 251, 7), *(at + d for at, _ in MainScreen.HORIZONTAL_BREAKPOINTS
                                           or () for d in (-1, 0, 1))]:
            for height in [*range(10, 81, 3), *(at + d for at, _ in
                                                [*(MainScreen.VERTICAL_BREAKPOINTS or ()),
                                                 *(SparkTUI.VERTICAL_BREAKPOINTS or ())]
                                                for d in (-1, 0, 1))]:
                assert ours(app, screen, (width, height)) == \
                    textual_classes(app, screen, (width, height)), (width, height)
    finally:
        app.VERTICAL_BREAKPOINTS = []


def test_the_copied_textual_methods_are_the_ones_read() -> None:
    """tui/breakpoints.py copies these two methods' logic as Textual 8.2.8 has
    them: a new Textual (or an edit of either) must be read again, the copy
    mended or dropped (Textual may set the classes before the first layout by
    then: docs/UPSTREAM.md's report), and the hashes here updated."""
    assert textual.__version__ == TEXTUAL_READ, textual.__version__
    assert {name: source_hash(name) for name in SOURCE_READ} == SOURCE_READ
