"""The console app and the one factory that builds it for the CLI, the demo,
tests, snapshots and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import App, AutopilotCallbackType
from textual.binding import BindingType
from textual.command import CommandInput, CommandPalette, Provider
from textual.notifications import SeverityLevel
from textual.worker import Worker, WorkerFailed, WorkerState

from sparktui.core.clock import Clock
from sparktui.core.config import Config
from sparktui.core.errors import InputError
from sparktui.core.fit import fit
from sparktui.core.measured import BootFigures, boot_of
from sparktui.core.recipe_load import load_recipe
from sparktui.ops.guards import Override, protected_lane
from sparktui.ops.recipe_record import unrecorded
from sparktui.ops.workflows.runner import WorkflowResult
from sparktui.service.actions import ActionPreview
from sparktui.service.cluster import ClusterService
from sparktui.service.events import Alert, LogLinesArrived, ServiceEvent
from sparktui.tui.alertbook import AlertBook
from sparktui.tui.bindings import APP_BINDINGS, NAV_ACTIONS
from sparktui.tui.breakpoints import fit_breakpoints
from sparktui.tui.commands import ActionCommands, Command
from sparktui.tui.messages import ServiceReported
from sparktui.tui.screens.alerts import AlertsScreen, Notice
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import (
    HelpScreen,
    MarkdownScreen,
    PickerScreen,
    ResumeChoice,
    ResumeScreen,
    TextScreen,
)
from sparktui.tui.screens.main import MainScreen
from sparktui.tui.screens.picker import cluster_options
from sparktui.tui.widgets.alerts import NoticeLine, result_notice

OverrideRetry = Callable[[frozenset[Override]], None]
"""Proposes the refused action again with these overrides."""
NOTICES = 30
"""Console messages kept for the alerts list."""
SWITCHES_EVERY_S = 15.0
"""Real seconds between two reads of the shared switches."""


class SparkTUI(App[None]):
    CSS_PATH = "sparktui.tcss"
    TITLE = "sparktui"
    BINDINGS: ClassVar[list[BindingType]] = list(APP_BINDINGS)
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {ActionCommands}
    """Ours alone (tui/commands.py: Textual's system commands came first at random)."""
    COMMAND_PALETTE_BINDING = "ctrl+p"
    ACKS_ALERTS = True
    """``a`` acknowledges on the main screen (a replay keeps the key for itself)."""
    READS_SWITCHES = True
    """The shared switches' states are read every SWITCHES_EVERY_S (header, nodes pane)."""
    VERTICAL_BREAKPOINTS: list[tuple[int, str]] | None = [  # noqa: RUF012 (Textual: instance var)
        (0, "-short"), (36, "-tall")]
    """Modals fit their body to the terminal (the main screen has its own)."""

    def __init__(self, config: Config, service: ClusterService, *,
                 read_only: bool = False, tune_gc: bool = False,
                 demo_commands: Callable[[], list[Command]] | None = None) -> None:
        super().__init__()
        self.config = config
        self.service = service
        self.read_only = read_only
        self.tune_gc = tune_gc
        """The process is the console's own (the CLI): tune the collector at start."""
        self._full_passes = 0
        """Timed full passes so far (`_collect_fully`)."""
        self._config_title = config.path.name + (" · READ-ONLY" if read_only else "")
        self.title_notes: list[str] = []
        """Said in the header after the config (the demo: its simulator and speed)."""
        self.sub_title = f"{len(config.nodes)} nodes · {self.base_sub_title}"
        self.demo_commands = demo_commands
        """The demo's scenario triggers, offered first in the palette."""
        self.record_offers: dict[str, BootFigures] = {}
        """Per recipe, the last boot this console ran whose measured figures the
        recipe does not hold yet: the palette offers to record them."""
        self.notices: deque[Notice] = deque(maxlen=NOTICES)
        self.crashed: Exception | None = None
        """The first error nobody caught inside the running console (a handler,
        a timer, a worker that exits on error, a render): it closed the app, and
        `run_async` raises it once the terminal is restored."""

    @property
    def base_sub_title(self) -> str:
        """The config, read-only, and whether the sentinel polls for this console."""
        attached = self.service.attached
        return " · ".join([self._config_title, *self.title_notes,
                           *([attached] if attached else [])])

    # -- lifecycle -----------------------------------------------------------

    async def run_async(self, *, headless: bool = False, inline: bool = False,
                        inline_no_clear: bool = False, mouse: bool = True,
                        size: tuple[int, int] | None = None,
                        auto_pilot: AutopilotCallbackType | None = None) -> None:
        # returns what Textual's returns (App.run hands it on: the snapshot
        # tests' screenshot is that value)
        """Textual's, then the error that closed the console, raised: the CLI's
        last line of defence (cli/crash.py) turns it into one line, the
        traceback in ``<state_dir>/debug.log`` and exit 70. (`App.run` runs
        this too.)"""
        await super().run_async(headless=headless, inline=inline,
                                inline_no_clear=inline_no_clear, mouse=mouse, size=size,
                                auto_pilot=auto_pilot)
        if self.crashed is not None:
            raise self.crashed
        return self.return_value

    def _handle_exception(self, error: Exception) -> None:
        """Textual's one door for an error nobody caught (a Textual internal,
        `App._handle_exception`: docs/UPSTREAM.md; tests/tui/test_crash_path.py
        fails if Textual stops calling it). Textual closes the app as always
        (and keeps the error for `run_test` to raise); the traceback it would
        print once the terminal is restored, with every frame's locals (where
        a token may be), is dropped: `run_async` raises the error instead."""
        if self.crashed is None:  # a worker's: the error it raised, by name
            self.crashed = error.error if isinstance(error, WorkerFailed) \
                and isinstance(error.error, Exception) else error
        super()._handle_exception(error)
        self._exit_renderables.clear()

    def on_mount(self) -> None:
        self.screen_change_signal.subscribe(self, partial(fit_breakpoints, self))
        self.main_screen = MainScreen()
        self.push_screen(self.main_screen)
        # A dropped SSH session (SIGHUP) or a kill (SIGTERM) ends the console the
        # normal way: the service stops its workflows and releases their locks.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.exit)
        self.run_worker(self._start_service(), group="service", exclusive=True,
                        exit_on_error=False,
                        description="connect to the nodes and start watching")

    async def _start_service(self) -> None:
        problems = self.service.recipe_problems
        if problems:
            self.notify("\n".join(str(p) for p in problems[:5]),
                        title=f"{len(problems)} recipe problem(s): those recipes are not offered",
                        severity="warning", timeout=30)
        await self.service.start(self._from_service)
        if self.READS_SWITCHES and self.config.switches:
            self.read_switches()
            self.set_interval(SWITCHES_EVERY_S, self.read_switches, name="switch states")
        if self.tune_gc:
            quiet_collector()
            self.set_interval(GC_FULL_EVERY_S, self._collect_fully, name="full collection")
        if not self.read_only:
            self.offer_unfinished()

    def _collect_fully(self) -> None:
        """The timer's full pass. A method, not ``gc.collect`` itself: Textual
        counts a callback's parameters before it calls it, and cannot count a
        builtin's (`AttributeError: __func__`, the 600 s crash of issue 25)."""
        self._full_passes += 1
        collect_fully(thaw=self._full_passes % GC_THAW_EVERY == 0)

    async def on_unmount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
        await self.service.stop()

    def _from_service(self, event: ServiceEvent) -> None:
        if isinstance(event, LogLinesArrived):
            self.main_screen.log_arrived(event)
        else:
            self.main_screen.post_message(ServiceReported(event))

    def read_switches(self) -> None:
        """Read the shared switches' states in the background (Home Assistant)."""
        self.run_worker(self._read_switches(), group="switches", exclusive=True,
                        exit_on_error=False, description="read the shared switches")

    async def _read_switches(self) -> None:
        self.main_screen.show_switches(await self.service.switch_states())

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker outcomes reach the operator."""
        worker = event.worker
        if event.state is WorkerState.SUCCESS and worker.group == "actions" \
                and self.READS_SWITCHES and self.config.switches:
            self.read_switches()  # a cluster power on/off moves the switches
        if event.state is WorkerState.ERROR:
            title = {"actions": "workflow error", "preview": "could not prepare",
                     "bundle": "bundle failed"}.get(worker.group, "service error")
            self.notify(f"{worker.description}: {worker.error}", title=title,
                        severity="error", timeout=20)
        elif event.state is WorkerState.SUCCESS and worker.group == "actions":
            result = worker.result
            if isinstance(result, WorkflowResult):
                self.notify(result_notice(result.kind, result.target, result.message),
                            title="done" if result.ok else "FAILED",
                            severity="information" if result.ok else "error",
                            timeout=10 if result.ok else 30)
                if result.kind == "serve" and result.ok:
                    self._offer_record(result)
                elif result.kind == "record" and result.ok:
                    self.record_offers.pop(result.target, None)

    def _offer_record(self, result: WorkflowResult) -> None:
        """A boot's measured figures the recipe does not hold yet become the
        palette's "record RECIPE's boot figures" (its confirm shows them)."""
        boot = boot_of(result.wf, self.now(), result.detail)
        try:  # as it is on disk now: a figure recorded since is not offered again
            recipe = load_recipe(self.config, str(result.detail.get("recipe")))
        except InputError:
            return
        if boot is not None and unrecorded(recipe, boot):
            self.record_offers[recipe.name] = boot

    # -- messages and alerts -------------------------------------------------

    @property
    def alerts(self) -> AlertBook:
        """The main screen's alerts (a replay's fresh screen starts a fresh book)."""
        return self.main_screen.alerts

    def now(self) -> float:
        """Epoch seconds on the service's clock: when alerts and messages arrived."""
        return self.service.clock.time()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every message goes to the notice line, a row of the main screen's
        layout: no toast ever draws over a table, a modal or the header."""
        self.notices.appendleft((self.now(), title, message, severity))
        main = getattr(self, "main_screen", None)
        if main is not None and main.is_mounted:
            # queried, not query_one: while the console closes the line may be
            # gone already, and a late worker's message must not crash the exit
            for line in main.query(NoticeLine):
                line.say(message, title, severity)

    def command_mode(self, verb: str) -> None:
        """The palette again with ``verb`` typed: its suggestions are that
        verb's entries (k9s' ``:serve <recipe>``). Nothing is awaited."""
        palette = CommandPalette(id="--command-palette")

        def typed() -> None:
            box = palette.query_one(CommandInput)
            box.value = f"{verb} "
            box.cursor_position = len(box.value)

        self.push_screen(palette)
        palette.call_after_refresh(typed)

    def acknowledge(self, key: str) -> None:
        if self.alerts.acknowledge(key):
            self.main_screen.show_alerts()

    def show_alert_list(self) -> None:
        self.push_screen(AlertsScreen(self.alerts, list(self.notices), self.acknowledge,
                                      None if self.read_only else self.bundle_alert))

    def bundle_alert(self, alert: Alert) -> None:
        """An incident bundle of the alert's lane or node, as `sparktui bundle`
        writes it, in the background; the notice line says where it is."""
        self.notify(f"collecting an incident bundle of {alert.subject}…")
        self.run_worker(self._bundle(alert), group="bundle", exclusive=False,
                        exit_on_error=False, description=f"bundle {alert.subject}")

    async def _bundle(self, alert: Alert) -> None:
        result = await self.service.bundle(alert.subject, f"asked for from the console: "
                                                          f"{alert.level} {alert.subject}")
        missing = len(result.incident.missing)
        home = Path.home()
        path = (f"~/{result.path.relative_to(home)}" if result.path.is_relative_to(home)
                else str(result.path))
        self.notify(path + (f" ({missing} part(s) not collected: see SUMMARY.md)"
                            if missing else ""), title="bundle", timeout=30)

    def explain_read_only(self, action: str) -> None:
        self.notify(f"{action} is not offered: this console is read-only. Start a "
                    "writable one without --read-only (`sparktui console` or "
                    "`sparktui demo`)", title="read-only", severity="warning")

    async def action_nav(self, how: str) -> None:
        """j/k/ctrl+d/ctrl+u: the focused widget's own move (cursor or scroll)."""
        widget = self.screen.focused
        if widget is None:
            return
        for name in NAV_ACTIONS[how]:
            if hasattr(widget, f"action_{name}"):
                await widget.run_action(name)
                return

    # -- actions -------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.read_only))

    def propose(self, preview_factory: Callable[[], Awaitable[ActionPreview]],
                what: str, override: OverrideRetry | None = None) -> None:
        """Build the preview (the service may probe), then ask; the workflow
        runs only after confirmation, in the background."""
        if self.read_only:
            self.explain_read_only(what)
            return
        # at once: the preview may probe a starved node for seconds
        self.notify(f"preparing {what}: checking its guards…")
        self.run_worker(self._ask(preview_factory, override), group="preview", exclusive=True,
                        exit_on_error=False, description=f"prepare {what}")

    async def _ask(self, preview_factory: Callable[[], Awaitable[ActionPreview]],
                   override: OverrideRetry | None = None) -> None:
        self._show_preview(await preview_factory(), override)

    def _show_preview(self, preview: ActionPreview, override: OverrideRetry | None = None,
                      back: Callable[[], None] | None = None) -> None:
        """The confirm, or the refusal; a refusal every override can clear
        offers ``o``: the same action again with those overrides, which then
        needs the name typed (ops/confirm.py) and is journaled with them.
        ``back``: where escape on the refusal returns (the picker it came
        from); without one the notice line says nothing was done."""
        # the key's "preparing …" acknowledgement is answered (under the modal)
        self.notify(f"{preview.kind} {preview.target}: "
                    + ("refused, the modal says why" if not preview.allowed
                       else "checked, waiting for your confirm"))
        if not preview.allowed:
            needed = preview.report.needed_overrides()
            overridable = override is not None and not preview.report.blocking()

            def chosen(again: bool | None) -> None:
                if again and override is not None:
                    override(needed)
                elif back is not None:
                    back()
                else:
                    self.notify(f"{preview.kind} {preview.target} refused: nothing was done")

            self.push_screen(RefusalScreen(preview, overridable=overridable), chosen)
            return
        self.push_screen(ConfirmActionScreen(preview, self._heads_up(preview)),
                         partial(self._confirmed, preview))

    def _heads_up(self, preview: ActionPreview) -> str:
        """What the confirm says before the guards: a serve of a protected lane
        says so (else the first word of it was the refusal at ``x``)."""
        if preview.kind == "serve" and protected_lane(self.config, preview.target).refused:
            return (f"{preview.target} is a protected lane ([guards] protected_lanes): once "
                    "it serves, x (stop) and power on its nodes refuse; stop it by hand")
        return ""

    def _confirmed(self, preview: ActionPreview, ok: bool | None) -> None:
        if not ok or preview.run is None:
            self.notify(f"{preview.kind} {preview.target} cancelled: nothing was done")
            return
        self.notify(f"{preview.kind} {preview.target} started", timeout=4)
        self.run_worker(preview.run(), group="actions", exclusive=False, exit_on_error=False,
                        description=f"{preview.kind} {preview.target}")

    def propose_named(self, kind: str, target: str) -> None:
        s = self.service
        factories: dict[str, Callable[[], Awaitable[ActionPreview]]] = {
            "stop": lambda: s.preview_stop(target),
            "power-cycle": lambda: s.preview_power_cycle(target),
            "recover": lambda: s.preview_recover(target),
            "cluster-off": lambda: s.preview_cluster_power(target, on=False),
            "cluster-on": lambda: s.preview_cluster_power(target, on=True),
            "runlock-close": lambda: s.preview_runlock_close(target),
        }
        self.propose(factories[kind], f"{kind} {target}")

    def qualify_lane(self, lane: str) -> None:
        """The quality gate on a lane: the Qualify workflow's plan (its guards:
        the lane exists and serves) in the confirm modal, as `sparktui qualify`
        previews it; its state shows in the lane's row as it runs, the verdict
        ends on the notice line."""
        self.propose(lambda: self.service.preview_qualify(lane), f"qualify {lane}")

    def propose_serve(self, recipe: str, cluster: str | None = None,
                      overrides: frozenset[Override] = frozenset()) -> None:
        self.propose(lambda: self.service.preview_serve(recipe, cluster, overrides),
                     f"serve {recipe}", partial(self.propose_serve, recipe, cluster))

    def pick_and_serve(self) -> None:
        if self.read_only:
            self.explain_read_only("serve")
            return
        options = [(name, f"{name}  on {r.cluster}  ({r.engine}, "
                          f"{r.model.size_gb:.0f} GB)")
                   for name, r in sorted(self.service.recipes.items())]

        def chosen(name: str | None) -> None:
            if name is not None:
                self.pick_cluster(name)

        self.push_screen(PickerScreen("Serve which recipe?", options), chosen)

    def pick_cluster(self, recipe: str) -> None:
        """Every cluster with its serve verdict (the recipe's own first); the
        default is the first that passes."""
        self.notify(f"checking {recipe} on {len(self.config.clusters)} clusters…")
        self.run_worker(self._pick_cluster(recipe), group="preview", exclusive=True,
                        exit_on_error=False, description=f"check {recipe} on every cluster")

    async def _pick_cluster(self, recipe: str) -> None:
        qualified = self.service.recipe(recipe).cluster
        names = [qualified, *(c for c in self.config.clusters if c != qualified)]
        previews = {c: await self.service.preview_serve(recipe, c) for c in names}
        options, default = cluster_options(previews, qualified)
        self.notify(f"{recipe}: {len(previews)} clusters checked")

        def chosen(cluster: str | None) -> None:
            if cluster is not None:
                self._show_preview(previews[cluster], partial(self.propose_serve, recipe,
                                                              cluster),
                                   partial(pick, list(previews).index(cluster)))
            else:
                self.notify(f"serve {recipe} cancelled: nothing was done")

        def pick(highlight: int = default) -> None:
            self.push_screen(PickerScreen(
                f"Serve {recipe} on which cluster?", options, highlight=highlight,
                hint="enter: the confirm (or why it is refused)   escape: cancel"), chosen)

        pick()

    def offer_unfinished(self, besides: str = "") -> None:
        """Every unfinished workflow (but ``besides``, being completed) in one
        list: one screen, not one modal each."""
        waiting = [o for o in self.service.unfinished() if o.record.wf != besides]
        if waiting:
            self.push_screen(ResumeScreen(waiting), self._resume_chosen)

    def _resume_chosen(self, chosen: ResumeChoice | None) -> None:
        if chosen is None:
            return
        choice, offer = chosen
        if choice == "resume":
            self.offer_unfinished(besides=offer.record.wf)  # the others, under its confirm
            self.propose(lambda: self.service.preview_resume(offer), f"resume {offer.record.wf}")
        elif choice == "close":
            freed = self.service.close_unfinished(offer, "closed from the console")
            self.notify(f"{offer.record.wf} closed" + (f"; unlocked {', '.join(freed)}"
                                                       if freed else ""))
            self.offer_unfinished()

    def show_fit(self, recipe: str) -> None:
        r = self.service.recipe(recipe)
        report = fit(self.config, r, r.cluster)
        text = Text()
        text.append(f"{report.verdict.upper()}\n", style="bold")
        for key, value in report.to_json().items():
            if key in ("reasons", "notes", "recipe", "cluster", "verdict"):
                continue
            text.append(f"{key:>28}: ", style="bold")
            text.append(f"{value}\n")
        for reason in report.reasons:
            text.append("refused: ", style="bold")
            text.append(f"{reason}\n")
        for note in report.notes:
            text.append(f"note: {note}\n")
        self.push_screen(TextScreen(f"fit {recipe} on {r.cluster}", text))

    def show_runlocks(self) -> None:
        body = "\n".join(self.service.runlock_lines()) or "no run locks"
        self.push_screen(TextScreen("Run locks", body))

    def pick_runlock_close(self) -> None:
        locks = self.service.runlocks()
        if not locks:
            self.notify("no run locks to close")
            return

        def chosen(node: str | None) -> None:
            if node is not None:
                self.propose_named("runlock-close", node)

        self.push_screen(PickerScreen("Close which run lock?", [
            (lock.node, f"{lock.node}: {lock.describe()}") for lock in locks]), chosen)

    def show_shift_log(self) -> None:
        self.push_screen(MarkdownScreen("Shift log (last 16 h)", self.service.shift_log()))


GC_THRESHOLDS = (5_000, 200, 1000)
"""Python's defaults (2000, 10, 10) run a full collection every few seconds
while a boot log streams, each a 100-250 ms stall of keys and frames. A young
pass costs ~0.5-2.5 us per young object here (Textual's layout maps are cyclic
garbage; every Strip it draws brings four small caches): at 50,000 the passes
were rare but 100-350 ms each, the p99 of a key during an incident; at 10,000
10-25 ms, inside most of the slowest keys once the keys themselves got
cheaper; at 5,000 5-8 ms. At 3,000 (3-6 ms) the log's ingest under this
collector was ~9 % slower than at 10,000 (bench/bench_watch.py); 5,000 is
between. The middle generation would be collected every ~1M allocations
(bench/bench_tui.py --incident); the timed full pass comes first
(GC_FULL_EVERY_S)."""
GC_FULL_EVERY_S = 60.0
"""With full passes this rare, run one on a timer: cyclic garbage that lived
long (closed modals, finished workflows) is freed at a known pace. The demo
at 1x with keys every 1.5 s makes ~45,000 objects of it a minute, and a pass
costs what it frees plus what it walks (bench/bench_full_collection.py, two
consoles side by side, 11 min, load 2-6). Round 12's console (a plain pass
every 600 s) paused 1,021 ms in a middle pass, the garbage having waited for
it, and 257 ms in its full pass, which walked the 174,000 survivors of the
night so far (152 ms again right after it); RSS 148.7 MiB. Every 60 s, each
pass's survivors frozen (`collect_fully`): no middle pass runs (none over
15 ms), each pass frees a minute of garbage and walks only what was made
since, 66-291 ms (median 195 ms, CPU 50-126 ms), the tenth 411 ms
(`GC_THAW_EVERY`); RSS 127.1 MiB. The collector's total was the same (4.4 s
in 11 min): fewer long stalls, more short ones."""


GC_THAW_EVERY = 10
"""Every this many timed passes the frozen objects are collected too: a
survivor of a pass frozen and later dead in a cycle is freed by no other pass
(26,585 such objects after 10 passes at 60 s, 4,630 with the start-up freeze
alone; the tenth pass found ~12,000 more than the others,
bench/bench_full_collection.py), so what it costs is bounded by what ten
passes freeze."""


def collect_fully(*, thaw: bool = False) -> None:
    """A full pass, then what survived it frozen as the start-up heap was
    (`quiet_collector`): a survivor of a full pass is long-lived, and the next
    pass walks only what was made since (a plain pass walked ~180,000 of them
    again 10 minutes in: 152-381 ms). ``thaw``: the frozen objects are
    collected too (`GC_THAW_EVERY`). Textual never freezes or collects; it
    disables the collector during smooth scrolls only with PAUSE_GC_ON_SCROLL
    (off by default; Textual 8.2.8 app.py:526, :1023), which a pass called
    explicitly ignores."""
    if thaw:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


def quiet_collector() -> None:
    """Everything built so far (widgets, config, recipes, connections) lives as
    long as the app: freeze it out of the collector's passes, and collect the
    young generations less often."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def make_app(config: Config, *, service: ClusterService | None = None,
             read_only: bool = False, clock: Clock | None = None,
             tune_gc: bool = False,
             demo_commands: Callable[[], list[Command]] | None = None) -> SparkTUI:
    """The console on ``config``; a service built from the config unless one
    is given (tests and the demo inject theirs). ``tune_gc`` when the process
    is the console's alone (the CLI, the benchmark), never inside a test run."""
    return SparkTUI(config, service or ClusterService(config, clock=clock),
                    read_only=read_only, tune_gc=tune_gc, demo_commands=demo_commands)
