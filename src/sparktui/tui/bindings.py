"""Every key of the console as data: an id (remappable with `App.set_keymap`),
the key, the action and what it does. The footer and the help screen read
these; nothing handles keys outside them."""

from __future__ import annotations

from textual.binding import Binding

ACTION_IDS = frozenset({"serve", "stop", "power-cycle", "recover"})
"""Bindings that change the cluster: absent in read-only mode."""

APP_BINDINGS: list[Binding] = [
    Binding("q", "quit", "Quit", id="quit", tooltip="Leave the console (workflows are "
            "journalled and offered again at the next start)"),
    Binding("question_mark", "help", "Help", id="help", key_display="?",
            tooltip="Every key and command"),
    Binding("colon", "command_palette", "Commands", id="palette", key_display=":",
            tooltip="Every action by name"),
]

MAIN_BINDINGS: list[Binding] = [
    Binding("1", "pane('nodes')", "Nodes", id="pane-nodes", show=False,
            tooltip="Show / focus the Nodes pane"),
    Binding("2", "pane('lanes')", "Lanes", id="pane-lanes", show=False,
            tooltip="Show / focus the Lanes pane"),
    Binding("3", "pane('bootlog')", "Log", id="pane-bootlog", show=False,
            tooltip="Show / focus the Boot log pane"),
    Binding("4", "pane('memory')", "Memory", id="pane-memory", show=False,
            tooltip="Show / focus the Memory pane"),
    Binding("s", "serve", "Serve", id="serve", tooltip="Serve a recipe on a cluster (picker)"),
    Binding("x", "stop", "Stop", id="stop", tooltip="Stop the selected lane (typed name)"),
    Binding("P", "power_cycle", "Power", id="power-cycle", key_display="P",
            tooltip="Power-cycle the selected node through its Home Assistant plug"),
    Binding("R", "recover", "Recover", id="recover", key_display="R",
            tooltip="SSH retries, then a plug cycle of the selected node"),
    Binding("f", "follow", "Follow", id="follow", tooltip="Follow / pause the boot log"),
    Binding("slash", "search", "Search", id="search", key_display="/",
            tooltip="Search the boot log (n: next match)"),
    Binding("n", "next_match", "Next", id="next-match", show=False,
            tooltip="Next search match"),
    Binding("t", "filter_text", "Filter", id="filter-text", show=False,
            tooltip="Show only boot-log lines containing a text"),
    Binding("l", "cycle_level", "Level", id="filter-level", show=False,
            tooltip="Boot-log severity: all / warn+ / fatal"),
    Binding("w", "wrap", "Wrap", id="wrap", show=False, tooltip="Wrap long boot-log lines"),
    Binding("r", "rank", "Rank", id="rank", tooltip="Choose which rank's log to show"),
]


def all_bindings() -> list[Binding]:
    return [*MAIN_BINDINGS, *APP_BINDINGS]
