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

from textual import events
from textual.containers import Vertical


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
