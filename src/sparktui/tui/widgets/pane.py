"""One of the main screen's four panes: a bordered container whose classes
restyle the pane alone.

Textual restyles a node and every node below it on any class change of the
node, and on a focus change it restyles the whole subtree of the outermost
ancestor with a ``:focus-within`` rule (textual issue #6524). Below a pane
are a DataTable (each restyle applies a dozen component styles) or the boot
log: a pane key used to restyle two panes' subtrees three times, most of the
key's time (bench/bench_tui.py). The pane's own classes (``-current``: the
pane shown at 80x24; ``-focused``: focus is inside it, which the pane marks
itself instead of a ``:focus-within`` rule) select only the pane in
sparktui.tcss, so applying the stylesheet to the pane is enough.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.containers import Vertical
from textual.widget import Widget

if TYPE_CHECKING:
    _WidgetBase = Widget
else:
    _WidgetBase = object


class Pane(Vertical):
    def update_node_styles(self, animate: bool = True) -> None:
        """This pane's styles only: no rule selects below a pane by its classes."""
        self.app.stylesheet.apply(self, animate=animate)

    def choose(self, chosen: bool) -> None:
        """Shown at 80x24 (or not), and focus is about to move in (or out):
        one restyle, and the border follows in the same frame as the pane."""
        self.update_classes({"-current": chosen, "-focused": chosen})

    def _on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self.set_class(self.has_focus_within, "-focused")

    def _on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self.set_class(self.has_focus_within, "-focused")


class RestyledWhileShown(_WidgetBase):
    """Mixed into a pane's own widgets (the tables, the boot log, the memory
    pane). Textual restyles a node on every change of its classes or
    pseudo-classes: for a DataTable ~2 ms (a dozen component classes and the
    scrollbars), for the boot log ~3 ms. A pane key at 80x24 paid it twice:
    for the widget losing focus as its pane is hidden, then for the widget
    gaining it as its pane is shown, in the very state it was last styled in.
    A hidden widget is not restyled: shown by a pane key it takes the focus
    back (the state it was styled for, or a change restyles it then); shown by
    a resize, the screen's breakpoint classes restyle every node below it."""

    _styled_for: tuple[frozenset[str], frozenset[str]] | None = None
    """The classes and pseudo-classes the widget's styles were last computed for."""

    def update_node_styles(self, animate: bool = True) -> None:
        if (self.classes, self.pseudo_classes) == self._styled_for:
            return
        if not all(node.display for node in self.ancestors_with_self if isinstance(node, Widget)):
            return
        super().update_node_styles(animate)

    def notify_style_update(self) -> None:
        self.remember_style_state()
        super().notify_style_update()

    def remember_style_state(self) -> None:
        """Every restyle ends here, whichever path applied it (a theme, a resize)."""
        self._styled_for = (self.classes, self.pseudo_classes)
