"""Every key of the console as data: an id (remappable with `App.set_keymap`),
the key, the action and what it does. The footer and the help screen read
these; nothing handles keys outside them."""

from __future__ import annotations

from textual.binding import Binding

ACTION_IDS = frozenset({"serve", "stop", "power-cycle", "recover", "qualify"})
"""Bindings that change the cluster or run a journaled workflow: in read-only
mode they say so and do nothing."""

APP_BINDINGS: list[Binding] = [
    Binding("q", "quit", "Quit", id="quit", tooltip="Leave the console (workflows are "
            "journalled and offered again at the next start)"),
    Binding("question_mark,f1", "help", "Help", id="help", key_display="?",
            tooltip="Every key and command (F1 too)"),
    Binding("colon", "command_palette", "Commands", id="palette", key_display=":",
            tooltip="Every action by name (ctrl+p too)"),
    Binding("j", "nav('down')", "Down", id="nav-down", show=False,
            tooltip="Down one row (like the down arrow)"),
    Binding("k", "nav('up')", "Up", id="nav-up", show=False,
            tooltip="Up one row (like the up arrow)"),
    Binding("ctrl+d", "nav('page_down')", "Page down", id="nav-page-down", show=False,
            tooltip="Down a page (like PageDown)"),
    Binding("ctrl+u", "nav('page_up')", "Page up", id="nav-page-up", show=False,
            tooltip="Up a page (like PageUp)"),
]

MODAL_NAV_BINDINGS: list[Binding] = [
    Binding(b.key, f"app.{b.action}", b.description, show=False, id=f"modal-{b.id}")
    for b in APP_BINDINGS if b.id is not None and b.id.startswith("nav-")]
"""j/k/ctrl+d/ctrl+u inside a modal: Textual stops a modal's key chain at the
modal, so the app's own bindings never reach a list or a body there."""

NAV_ACTIONS = {"down": ("cursor_down", "scroll_down"), "up": ("cursor_up", "scroll_up"),
               "page_down": ("page_down",), "page_up": ("page_up",)}
"""What j/k/ctrl+d/ctrl+u run on the focused widget: the first action it has."""

TABLE_BINDINGS: list[Binding] = [
    Binding("home", "scroll_top", "Top", id="table-top", show=False,
            tooltip="First row"),
    Binding("end", "scroll_bottom", "Bottom", id="table-bottom", show=False,
            tooltip="Last row"),
]
"""The tables' Home/End move the cursor (the stock ones only scroll sideways)."""

MAIN_BINDINGS: list[Binding] = [
    Binding("1", "pane('nodes')", "Nodes", id="pane-nodes", show=False,
            tooltip="Show / focus the Nodes pane"),
    Binding("2", "pane('lanes')", "Lanes", id="pane-lanes", show=False,
            tooltip="Show / focus the Lanes pane"),
    Binding("3", "pane('bootlog')", "Log", id="pane-bootlog", show=False,
            tooltip="Show / focus the Boot log pane"),
    Binding("4", "pane('memory')", "Memory", id="pane-memory", show=False,
            tooltip="Show / focus the Memory pane"),
    Binding("tab", "next_pane(1)", "Next pane", id="pane-next", show=False,
            tooltip="The next pane (its frame lights up; at 80 columns it shows alone)"),
    Binding("shift+tab", "next_pane(-1)", "Previous pane", id="pane-previous", show=False,
            tooltip="The previous pane"),
    Binding("s", "serve", "Serve", id="serve", tooltip="Serve a recipe on a cluster (picker)"),
    Binding("x", "stop", "Stop", id="stop", tooltip="Stop the selected lane (typed name)"),
    Binding("P", "power_cycle", "Power", id="power-cycle", key_display="P",
            tooltip="Power-cycle the selected node through its Home Assistant plug"),
    Binding("R", "recover", "Recover", id="recover", key_display="R",
            tooltip="SSH retries, then a plug cycle of the selected node"),
    Binding("g", "qualify", "Gate", id="qualify", show=False,
            tooltip="Quality gate of the selected serving lane (copy, identifiers, bench)"),
    Binding("f", "follow", "Follow", id="follow", show=False,
            tooltip="Follow / pause the boot log (End follows, Home pauses at the top)"),
    Binding("slash", "search", "Search", id="search", key_display="/",
            tooltip="Search the boot log (n: next match)"),
    Binding("n", "next_match", "Next", id="next-match", show=False,
            tooltip="Next search match"),
    Binding("t", "filter_text", "Filter", id="filter-text", show=False,
            tooltip="Show only boot-log lines containing a text"),
    Binding("l", "cycle_level", "Level", id="filter-level", show=False,
            tooltip="Boot-log severity: all / warn+ / fatal"),
    Binding("w", "wrap", "Wrap", id="wrap", show=False,
            tooltip="Wrap long boot-log lines (the search match stays in view)"),
    Binding("h", "probes", "Probes", id="probe-lines", show=False,
            tooltip="Show / fold the console's own requests: GET /health, /metrics and "
            "the canary's chat request (every 200 completion line)"),
    Binding("r", "rank", "Rank", id="rank", show=False,
            tooltip="Choose which rank's log to show"),
    Binding("a", "ack", "Ack", id="ack", show=False,
            tooltip="Acknowledge the alert on the alert line (the next one shows)"),
    Binding("exclamation_mark", "alerts", "Alerts", id="alerts", key_display="!",
            tooltip="Every alert: evidence, next step, time; cleared ones and messages"),
]


READ_ONLY_BINDINGS: list[Binding] = [
    Binding(b.key, f"read_only('{b.id}')", b.description, show=False, id=f"read-only-{b.id}")
    for b in MAIN_BINDINGS if b.id in ACTION_IDS]
"""The action keys of a read-only console: they explain instead of acting."""


def all_bindings() -> list[Binding]:
    return [*MAIN_BINDINGS, *APP_BINDINGS, *TABLE_BINDINGS]
