"""Textual's Footer, recomposed only when the keys it shows change.

The stock Footer rebuilds every key widget on every bindings update, which
fires on every focus change; here focus moves with every pane switch, and that
rebuild was a visible share of key-to-paint (bench/bench_tui.py)."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


def shown_keys(screen: Screen) -> tuple[tuple[str, str, str, bool, str], ...]:
    """What the footer would show: (key, action, description, enabled, tooltip)."""
    return tuple(
        (binding.key, binding.action, binding.description, enabled, tooltip)
        for (_, binding, enabled, tooltip) in screen.active_bindings.values()
        if binding.show
    )


class StableFooter(Footer):
    _shown: tuple[tuple[str, str, str, bool, str], ...] | None = None

    def bindings_changed(self, screen: Screen) -> None:
        shown = shown_keys(screen)
        if self._bindings_ready and shown == self._shown:
            return
        self._shown = shown
        super().bindings_changed(screen)
