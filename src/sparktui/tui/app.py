"""The console app and the one factory that builds it for the CLI, the demo,
tests, snapshots and benchmarks."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import App
from textual.binding import BindingType
from textual.worker import Worker, WorkerState

from sparktui.core.clock import Clock
from sparktui.core.config import Config
from sparktui.core.fit import fit
from sparktui.service.actions import ActionPreview
from sparktui.service.cluster import ClusterService
from sparktui.service.events import ServiceEvent
from sparktui.tui.bindings import APP_BINDINGS
from sparktui.tui.commands import ActionCommands
from sparktui.tui.messages import ServiceReported
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import HelpScreen, PickerScreen, TextScreen
from sparktui.tui.screens.main import MainScreen


class SparkTUI(App[None]):
    CSS_PATH = "sparktui.tcss"
    TITLE = "sparktui"
    BINDINGS: ClassVar[list[BindingType]] = list(APP_BINDINGS)
    COMMANDS = App.COMMANDS | {ActionCommands}
    COMMAND_PALETTE_BINDING = "ctrl+p"

    def __init__(self, config: Config, service: ClusterService, *,
                 read_only: bool = False) -> None:
        super().__init__()
        self.config = config
        self.service = service
        self.read_only = read_only
        self.sub_title = (f"{len(config.nodes)} nodes · {config.path.name}"
                          + (" · READ-ONLY" if read_only else ""))

    # -- lifecycle -----------------------------------------------------------

    def on_mount(self) -> None:
        self.main_screen = MainScreen()
        self.push_screen(self.main_screen)
        self.run_worker(self.service.start(self._from_service), group="service",
                        exclusive=True, exit_on_error=False,
                        description="connect to the nodes and start watching")

    async def on_unmount(self) -> None:
        await self.service.stop()

    def _from_service(self, event: ServiceEvent) -> None:
        self.main_screen.post_message(ServiceReported(event))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker outcomes reach the operator."""
        worker = event.worker
        if event.state is WorkerState.ERROR:
            title = "failed" if worker.group == "actions" else "service error"
            self.notify(f"{worker.description}: {worker.error}", title=title,
                        severity="error", timeout=20)
        elif event.state is WorkerState.SUCCESS and worker.group == "actions":
            self.notify(f"{worker.description}: {worker.result}", title="done")

    # -- actions -------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.read_only))

    def propose(self, preview: ActionPreview) -> None:
        """Show the guard verdicts; run the workflow only after confirmation."""
        if self.read_only:
            self.notify("read-only console: actions are disabled", severity="warning")
            return
        if not preview.allowed:
            self.push_screen(RefusalScreen(preview))
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_worker(self.service.run(preview), group="actions",
                                exclusive=False, exit_on_error=False,
                                description=f"{preview.kind} {preview.target}")

        self.push_screen(ConfirmActionScreen(preview), confirmed)

    def propose_named(self, kind: str, target: str) -> None:
        s = self.service
        previews = {
            "stop": lambda: s.preview_stop(target),
            "power-cycle": lambda: s.preview_power_cycle(target),
            "recover": lambda: s.preview_recover(target),
            "cluster-off": lambda: s.preview_cluster_power(target, on=False),
            "cluster-on": lambda: s.preview_cluster_power(target, on=True),
        }
        self.propose(previews[kind]())

    def propose_serve(self, recipe: str, cluster: str | None = None) -> None:
        self.propose(self.service.preview_serve(recipe, cluster))

    def pick_and_serve(self) -> None:
        if self.read_only:
            return
        options = [(name, f"{name}  on {r.cluster}  ({r.engine}, "
                          f"{r.model.size_gb:.0f} GB)")
                   for name, r in sorted(self.service.recipes.items())]

        def chosen(name: str | None) -> None:
            if name is not None:
                self.propose_serve(name)

        self.push_screen(PickerScreen("Serve which recipe?", options), chosen)

    def show_fit(self, recipe: str) -> None:
        r = self.service.recipes[recipe]
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

    def unavailable(self, what: str) -> None:
        self.notify(f"{what}: the ops journal and runlocks are not in this build yet",
                    severity="warning")


def make_app(config: Config, *, service: ClusterService | None = None,
             read_only: bool = False, clock: Clock | None = None) -> SparkTUI:
    """The console on ``config``; a service built from the config unless one
    is given (tests and the demo inject theirs)."""
    return SparkTUI(config, service or ClusterService(config, clock=clock), read_only=read_only)
