"""The main screen: Nodes, Lanes, Boot log and Memory panes and the alert bar.

Data flows in as service events and is always recorded; a pane that is hidden
(compact layout) or under a modal is only marked dirty and painted when it
shows again. In a wide terminal the four panes share a grid; below 120×36
one pane shows at a time, chosen with 1–4 (tab moves focus as usual).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Container
from textual.events import Resize, ScreenResume
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Header, Input, Static

from sparktui.core.state import NodeSnapshot
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.ops.events import (
    StepFinished,
    StepProgressed,
    StepStarted,
    WorkflowEvent,
    WorkflowFinished,
    WorkflowStarted,
)
from sparktui.ops.workflows.qualify import PREDICTED_OOM_STEP
from sparktui.service.attach import LOST_KEY
from sparktui.service.events import (
    AlertCleared,
    AlertRaised,
    LaneChanged,
    LaneGone,
    LogLinesArrived,
    NodeSampled,
    WorkflowProgressed,
)
from sparktui.service.lanes import LaneView
from sparktui.tui.alertbook import CLUSTER_LOST, AlertBook, cluster_lost
from sparktui.tui.bindings import MAIN_BINDINGS, READ_ONLY_BINDINGS
from sparktui.tui.details import lane_details, node_details
from sparktui.tui.messages import LogLinesPending, ServiceReported
from sparktui.tui.screens.info import PickerScreen, TextScreen
from sparktui.tui.screens.main_lines import activity_text, banner_text, busy_with, summary_line
from sparktui.tui.screens.picker import rank_options
from sparktui.tui.widgets.alerts import AlertLine, NoticeLine
from sparktui.tui.widgets.bootlog import BootLog
from sparktui.tui.widgets.footer import StableFooter
from sparktui.tui.widgets.memory import MemoryPane
from sparktui.tui.widgets.pane import Pane
from sparktui.tui.widgets.tables import LanesTable, NodesTable
from sparktui.watch.follower import LogLine
from sparktui.watch.readiness import RankContainer

if TYPE_CHECKING:
    from sparktui.tui.app import SparkTUI

PANES = ("nodes", "lanes", "bootlog", "memory")
PANE_TITLES = {"nodes": "1 Nodes", "lanes": "2 Lanes", "bootlog": "3 Boot log",
               "memory": "4 Memory"}
LOG_PAINT_EVERY_S = 0.05
"""A flooding boot log is drained into its pane at most 20 times a second.
Each drain of a following log is a scroll (and, while its buffer grows, a
layout pass of the screen) and a repaint; at 1,000 lines/s nobody reads
faster, and every frame spent on the log is time a key waits
(bench/bench_tui.py --incident)."""
ACTION_NAMES = {"serve": "serve", "stop": "stop", "power_cycle": "power-cycle",
                "recover": "recover", "qualify": "qualify"}


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [*MAIN_BINDINGS, *READ_ONLY_BINDINGS]
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [  # noqa: RUF012 (Textual: instance var)
        (0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS: list[tuple[int, str]] | None = [  # noqa: RUF012 (Textual: instance var)
        (0, "-short"), (36, "-tall")]
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
    """Textual repaints the whole screen on every focus change (its ``focused``
    repaints); the widgets gaining and losing focus repaint themselves and the
    footer follows the bindings, so a pane key paints the pane, the tab row and
    the footer: at 80x24 the full repaint was ~4 ms of a ~30 ms key."""

    def __init__(self) -> None:
        super().__init__(id="main")
        self.current_pane = "nodes"
        self.lane: str | None = None
        self.rank = 0
        self._log_end = 0
        self._log_inbox: list[LogLine] = []
        self._drained_at = 0.0
        self._summary = ""
        self._input_mode = "search"
        self._lanes: dict[str, LaneView] = {}
        self._pending_nodes: dict[str, tuple[NodeSnapshot, ThrashVerdict | None]] = {}
        self._pending_lanes: set[str] = set()
        self._activity: dict[str, str] = {}
        """lane -> what its running workflow is doing (shown in Progress)."""
        self.alerts = AlertBook()
        """Active alerts (acknowledged or not) and the recently cleared ones."""
        self._workflows: dict[str, tuple[str, str, str, str]] = {}
        """workflow id -> (kind, target, current step in full, its name)."""
        self._switches: dict[str, str | None] = {}
        """Shared switch name -> on, off, unavailable, None (unknown)."""
        self._banner = Text()
        self._activity_text = Text()
        self._predicted: dict[str, str] = {}
        """node -> the evidence of a predicted OOM of a lane loading on it."""
        self._ranks_seen: dict[str, dict[int, RankContainer]] = {}
        """lane -> every rank the console has seen listed since the lane appeared:
        a dark node's rank leaves the lane's listing, its last lines stay readable."""

    @property
    def spark(self) -> SparkTUI:
        return cast("SparkTUI", self.app)

    def compose(self) -> ComposeResult:
        config = self.spark.config
        yield Header(show_clock=False, icon="≡")
        yield AlertLine(id="alerts")
        yield Static("", id="tabs")
        with Container(id="panes"):
            with Pane(id="nodes-pane", classes="pane -current"):
                yield NodesTable(config, id="nodes")
            with Pane(id="lanes-pane", classes="pane"):
                yield LanesTable(id="lanes")
                yield Static("no lane yet" + (" (read-only: a writable console serves one)"
                                              if self.spark.read_only else
                                              ": s serves a recipe"), id="lanes-empty")
                yield Static("", id="activity")
            with Pane(id="bootlog-pane", classes="pane"):
                yield Static("", id="phase-banner")
                yield BootLog(id="bootlog")
                yield Input(id="log-input", placeholder="search")
            with Pane(id="memory-pane", classes="pane"):
                yield MemoryPane(list(config.nodes), config.thrash, id="memory")
        yield NoticeLine(id="notice")
        yield StableFooter(compact=True)

    def on_mount(self) -> None:
        for name in PANES:
            self.query_one(f"#{name}-pane").border_title = PANE_TITLES[name]
        self.query_one("#log-input", Input).display = False
        self.query_one("#log-input", Input).cursor_blink = False
        self.query_one(AlertLine).show(self.alerts, ack_key=self.spark.ACKS_ALERTS)
        self._show_tabs()
        self._update_banner()
        self.query_one(NodesTable).focus()

    # -- visibility ----------------------------------------------------------

    def _visible(self, pane: str) -> bool:
        return self.app.screen is self and self.query_one(f"#{pane}-pane").display

    def on_screen_resume(self, event: ScreenResume) -> None:
        self._flush()

    def on_resize(self, event: Resize) -> None:
        """A pane the compact layout hid shows in the wide one: what arrived
        meanwhile, once the new layout is in (it showed its last painted rows)."""
        self.call_after_refresh(self._flush)

    def _flush(self) -> None:
        """Paint what arrived while a pane was hidden or under a modal."""
        if self._visible("nodes") and self._pending_nodes:
            self._paint_nodes()
        if self._visible("lanes") and self._pending_lanes:
            for name in self._pending_lanes:
                if name in self._lanes:
                    lv = self._lanes[name]
                    self.query_one(LanesTable).show(lv, self._activity.get(name, ""),
                                                    self._oom_node(lv))
            self._pending_lanes.clear()
        log = self.query_one(BootLog)
        if self._visible("bootlog"):
            log.resume_render()
        else:
            log.paused_render = True
        if self._visible("memory"):
            self.query_one(MemoryPane).render_now()

    # -- service events ------------------------------------------------------

    @on(ServiceReported)
    def _on_service(self, message: ServiceReported) -> None:
        ev = message.event
        if isinstance(ev, NodeSampled):
            self._node_sampled(ev)
        elif isinstance(ev, LaneChanged):
            self._lane_changed(ev.lane)
        elif isinstance(ev, LaneGone):
            self._lanes.pop(ev.name, None)
            self._ranks_seen.pop(ev.name, None)
            self.query_one(LanesTable).drop_row(ev.name)
            self.query_one("#lanes-empty").display = not self._lanes
            self._predictions_changed()
        elif isinstance(ev, AlertRaised):
            self.alerts.raised(ev.alert, self.spark.now() if ev.at is None else ev.at)
            self.show_alerts()
            if ev.alert.key == LOST_KEY:
                self._summary = ""  # the header's mark goes now, not at the next change
                self._summarise()
            if ev.alert.level == PREDICTED_OOM_STEP:
                self._predictions_changed()
        elif isinstance(ev, AlertCleared):
            back = ev.key == LOST_KEY  # the console is attached to a sentinel again
            self.alerts.cleared_key(ev.key, self.spark.now() if ev.at is None else ev.at,
                                    ev.why or ("re-attached" if back else ""))
            if back:
                self.notify(f"re-attached: {self.spark.service.attached}", timeout=20)
                self._summary = ""  # the header's "attached to sentinel" mark, now
                self._summarise()
            self.show_alerts()
            if ev.key.startswith(PREDICTED_OOM_STEP):
                self._predictions_changed()
        elif isinstance(ev, WorkflowProgressed):
            self._workflow(ev.event)

    def _workflow(self, e: WorkflowEvent) -> None:
        """Workflow progress: a line per running workflow in the Lanes pane, the
        lane's Progress cell, and a notification when a step fails."""
        if isinstance(e, WorkflowStarted):
            self._workflows[e.wf] = (e.kind, e.target, f"{len(e.steps)} step(s) planned", "")
        elif e.wf in self._workflows:
            kind, target, _, _ = self._workflows[e.wf]
            if isinstance(e, StepStarted):
                self._workflows[e.wf] = (kind, target, f"{e.step} [{e.target}]", e.step)
            elif isinstance(e, StepProgressed):
                self._workflows[e.wf] = (kind, target, f"{e.step} [{e.target}]: {e.message}",
                                         e.step)
            elif isinstance(e, StepFinished) and not e.ok:
                self.notify(f"{kind} {target}: {e.step} [{e.target}] failed: {e.message}",
                            severity="error", timeout=20)
            elif isinstance(e, WorkflowFinished):
                del self._workflows[e.wf]
        self._activity = {t: f"{k}: {short}" if short else k
                          for k, t, _, short in self._workflows.values()}
        self._show_activity()

    def _show_activity(self) -> None:
        """Below the lanes: each running workflow's step, each predicted OOM."""
        text = activity_text(self._workflows.values(), self._predicted.values())
        if text != self._activity_text:
            self._activity_text = text
            self.query_one("#activity", Static).update(text)
        for lane in self._lanes:
            self._pending_lanes.add(lane)
        self._flush()

    def _predictions_changed(self) -> None:
        """Predicted OOMs (alert evidence) on the nodes of lanes still loading:
        the lanes' Progress cells, the lines below them and the memory pane."""
        loading = {n for lv in self._lanes.values() if lv.load is not None for n in lv.nodes}
        predicted = {e.alert.subject: e.alert.evidence[0] if e.alert.evidence else
                     e.alert.subject for e in self.alerts.active.values()
                     if e.alert.level == PREDICTED_OOM_STEP and e.alert.subject in loading}
        if predicted == self._predicted:
            return
        self._predicted = predicted
        self.query_one(MemoryPane).set_predicted(predicted)
        self._show_activity()

    def _oom_node(self, lane: LaneView) -> str:
        return next((n for n in lane.nodes if n in self._predicted), "")

    def log_arrived(self, ev: LogLinesArrived) -> None:
        """Called by the app for every batch: only the shown rank's lines are
        kept, and one message wakes the screen however many batches wait."""
        if ev.lane != self.lane or ev.rank != self.rank or ev.end <= self._log_end:
            return
        fresh = ev.lines[max(0, len(ev.lines) - (ev.end - self._log_end)):]
        self._log_end = ev.end
        if not self._log_inbox:
            self.post_message(LogLinesPending())
        self._log_inbox.extend(fresh)

    @on(LogLinesPending)
    def _drain_logs(self) -> None:
        """At most LOG_PAINT_EVERY_S apart: lines that flood in wait in the
        inbox for the next drain (one timer at a time: the inbox is not empty,
        so no other message comes)."""
        wait = self._drained_at + LOG_PAINT_EVERY_S - time.monotonic()
        if wait > 0:
            self.set_timer(wait, self._drain_now, name="boot log drain")
        else:
            self._drain_now()

    def _drain_now(self) -> None:
        lines, self._log_inbox = self._log_inbox, []
        if not lines:
            return  # the lane changed since (select_lane emptied the inbox)
        self._drained_at = time.monotonic()
        log = self.query_one(BootLog)
        log.paused_render = not self._visible("bootlog")
        log.add_lines(lines)

    def _node_sampled(self, ev: NodeSampled) -> None:
        snap = ev.snapshot
        self._pending_nodes[snap.node] = (snap, ev.verdict)
        memory = self.query_one(MemoryPane)
        if ev.last_point is not None:
            memory.add_point(snap.node, ev.last_point)
        memory.set_level(snap.node, ev.verdict.level if ev.verdict else ThrashLevel.OK)
        self._flush_nodes()
        self._summarise()

    def _summarise(self) -> None:
        """The header's one line: how many nodes are in which state."""
        snapshot = self.spark.service.snapshot()
        summary = summary_line(snapshot, self._switches)
        lost = cluster_lost(snapshot.nodes)
        if (lost is None) == (CLUSTER_LOST in self.alerts.active):  # it changed
            if lost is None:
                self.alerts.cleared_key(CLUSTER_LOST, self.spark.now())
            else:
                self.alerts.raised(lost, self.spark.now())
            self.show_alerts()
        if summary != self._summary:
            self._summary = summary
            self.spark.sub_title = f"{summary} · {self.spark.base_sub_title}"

    def show_switches(self, states: dict[str, str | None]) -> None:
        """Every shared switch under the nodes; one that is not on in the header too."""
        self._switches = dict(states)
        panes = self.query("#nodes-pane")
        if not panes:
            return  # a read that finished while the console closes
        panes.first().border_subtitle = " · ".join(
            f"{name} {'on' if state == 'on' else (state or 'unknown').upper()}"
            for name, state in states.items())
        self._summarise()

    def _paint_nodes(self) -> None:
        table = self.query_one(NodesTable)
        service = self.spark.service
        for snap, verdict in self._pending_nodes.values():
            table.show(snap, verdict, busy_with(snap), service.findings(snap.node))
        self._pending_nodes.clear()

    def _flush_nodes(self) -> None:
        if self._visible("nodes"):
            self._paint_nodes()
        if self._visible("memory"):
            self.query_one(MemoryPane).render_now()

    def _lane_changed(self, lane: LaneView) -> None:
        old = self._lanes.get(lane.name)
        self._lanes[lane.name] = lane
        self._ranks_seen.setdefault(lane.name, {}).update({r.rank: r for r in lane.ranks})
        self.query_one("#lanes-empty").display = False
        if old is None or (old.load is None) != (lane.load is None):
            self._predictions_changed()
        if self._visible("lanes"):
            self.query_one(LanesTable).show(lane, self._activity.get(lane.name, ""),
                                            self._oom_node(lane))
        else:
            self._pending_lanes.add(lane.name)
        if self.lane is None:
            self.select_lane(lane.name, 0)
        elif lane.name == self.lane:
            self._update_banner()

    # -- lane and rank selection ---------------------------------------------

    def select_lane(self, lane: str, rank: int) -> None:
        if (lane, rank) == (self.lane, self.rank):
            return
        self.lane, self.rank = lane, rank
        log = self.query_one(BootLog)
        log.clear_lines()
        log.paused_render = not self._visible("bootlog")
        lines, self._log_end = self.spark.service.log_tail(lane, rank)
        self._log_inbox = []
        log.add_lines(lines)
        self._update_banner()

    @on(DataTable.RowHighlighted, "#lanes")
    def _lane_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value and event.row_key.value != self.lane:
            self.select_lane(event.row_key.value, 0)

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key is None:
            return
        if event.data_table.id == "nodes":
            service = self.spark.service
            snap = service.snapshot().get(key)
            verdict = service.verdict(key)
            self.app.push_screen(TextScreen(f"Node {key}", node_details(
                self.spark.config, key, snap, verdict, service.findings(key))))
        elif key in self._lanes:
            self.app.push_screen(TextScreen(f"Lane {key}", lane_details(
                self._lanes[key], self.spark.service.prompt_ceiling(key))))

    @on(BootLog.FollowChanged)
    def _follow_changed(self) -> None:
        self._update_banner()

    def _update_banner(self) -> None:
        text = banner_text(self._lanes.get(self.lane) if self.lane else None, self.rank,
                           self.query_one(BootLog))
        if text != self._banner:  # unchanged text: no repaint, no layout pass
            self._banner = text
            self.query_one("#phase-banner", Static).update(text)

    # -- panes ---------------------------------------------------------------

    def _show_tabs(self) -> None:
        text = Text()
        for name in PANES:
            style = "bold reverse" if name == self.current_pane else ""
            text.append(f" {PANE_TITLES[name]} ", style=style)
            text.append(" ")
        self.query_one("#tabs", Static).update(text, layout=False)

    def action_next_pane(self, step: int) -> None:
        """Tab / shift+tab: focus moves pane by pane (the one that shows, at 80x24)."""
        self.action_pane(PANES[(PANES.index(self.current_pane) + step) % len(PANES)])

    def action_pane(self, name: str) -> None:
        self.query_one("#log-input", Input).display = False
        if name != self.current_pane:
            self.query_one(f"#{self.current_pane}-pane", Pane).choose(False)
            self.query_one(f"#{name}-pane", Pane).choose(True)
        self.current_pane = name
        self._show_tabs()
        targets: dict[str, type[Widget]] = {"nodes": NodesTable, "lanes": LanesTable,
                                             "bootlog": BootLog, "memory": MemoryPane}
        target = targets[name]
        self.query_one(target).focus()
        self.call_after_refresh(self._flush)

    # -- actions -------------------------------------------------------------

    def show_alerts(self) -> None:
        self.query_one(AlertLine).show(self.alerts, ack_key=self.spark.ACKS_ALERTS)

    def action_ack(self) -> None:
        """Acknowledge the alert the alert line shows (the next one takes its place)."""
        top = self.alerts.top()
        if top is None:
            self.notify("no unacknowledged alert")
            return
        self.spark.acknowledge(top.alert.key)

    def action_alerts(self) -> None:
        self.spark.show_alert_list()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """In read-only mode the action keys fall through to `read_only`, which
        says why nothing happens (and the footer does not offer them)."""
        if action == "read_only":
            return self.spark.read_only
        if action == "ack":
            return self.spark.ACKS_ALERTS
        return not (self.spark.read_only and action in ACTION_NAMES)

    def action_read_only(self, action: str) -> None:
        self.spark.explain_read_only(action)

    def _selected_node(self) -> str | None:
        return self.query_one(NodesTable).selected_key

    def _selected_lane(self) -> str | None:
        return self.query_one(LanesTable).selected_key or self.lane

    def action_serve(self) -> None:
        self.spark.pick_and_serve()

    def action_stop(self) -> None:
        lane = self._selected_lane()
        if lane is None:
            self.notify("no lane to stop: select one in the Lanes pane (2)", severity="warning")
            return
        self.spark.propose_named("stop", lane)

    def action_qualify(self) -> None:
        lane = self._selected_lane()
        if lane is None:
            self.notify("no lane to qualify: select one in the Lanes pane (2)",
                        severity="warning")
            return
        self.spark.qualify_lane(lane)

    def action_power_cycle(self) -> None:
        node = self._selected_node()
        if node is not None:
            self.spark.propose_named("power-cycle", node)

    def action_recover(self) -> None:
        node = self._selected_node()
        if node is not None:
            self.spark.propose_named("recover", node)

    def action_follow(self) -> None:
        log = self.query_one(BootLog)
        log.follow = not log.follow
        self._log_view_said()

    def action_probes(self) -> None:
        log = self.query_one(BootLog)
        log.show_probes = not log.show_probes
        self._log_view_said()

    def action_wrap(self) -> None:
        log = self.query_one(BootLog)
        log.wrap = not log.wrap
        self._log_view_said()

    def action_cycle_level(self) -> None:
        self.query_one(BootLog).cycle_level()
        self._log_view_said()

    def _log_view_said(self) -> None:
        """The banner's view row; a boot log key pressed where the log does not
        show (the Nodes pane at 80x24) says it on the notice line too: it
        changed a view nobody saw, and said nothing."""
        self._update_banner()
        if not self._visible("bootlog"):
            view = self._banner.plain.rsplit("\n", 1)[-1]
            self.notify(f"boot log {view} (3 shows it)")

    def action_search(self) -> None:
        self._open_input("search")

    def action_filter_text(self) -> None:
        self._open_input("filter")

    def _open_input(self, mode: str) -> None:
        """The prompt starts empty; the current search or filter shows in the
        banner (an empty submit clears it)."""
        if self.query_one("#bootlog-pane").display is False:
            self.action_pane("bootlog")
        self._input_mode = mode
        box = self.query_one("#log-input", Input)
        box.placeholder = ("search the boot log (enter: find, empty: clear)" if mode == "search"
                           else "show only lines containing (empty: all)")
        box.value = ""
        box.display = True
        box.focus()

    @on(Input.Submitted, "#log-input")
    def _input_done(self, event: Input.Submitted) -> None:
        event.stop()
        log = self.query_one(BootLog)
        if self._input_mode == "search":
            log.search = event.value
            if event.value and not log.find_next():
                self.notify(f"'{event.value}' not found in the boot log", severity="warning")
        else:
            log.text_filter = event.value
        event.input.display = False
        log.focus()
        self._update_banner()

    def action_next_match(self) -> None:
        log = self.query_one(BootLog)
        if log.search and not log.find_next():
            self.notify(f"'{log.search}' not found", severity="warning")
        self._update_banner()

    def action_rank(self) -> None:
        if self.lane is None or self.lane not in self._lanes:
            self.notify("no lane selected", severity="warning")
            return
        lv = self._lanes[self.lane]
        states = {s.node: s.state.value for s in self.spark.service.snapshot().nodes}
        options = rank_options(lv.ranks, self._ranks_seen.get(lv.name, {}), states)

        def chosen(value: str | None) -> None:
            if value is not None and self.lane is not None:
                self.select_lane(self.lane, int(value))

        self.app.push_screen(PickerScreen(f"Boot log of {lv.name}: which rank?", options),
                             chosen)

