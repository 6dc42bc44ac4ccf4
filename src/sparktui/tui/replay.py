"""The console, read-only, on a recorded night (`sparktui replay`): the same
app and panes over a `service.replay.ReplaySource`, plus the seek keys and
the replay clock in the header. A seek starts a fresh main screen and the
source reports the state at the new moment into it."""

from __future__ import annotations

import time
from typing import ClassVar

from textual.binding import Binding, BindingType

from sparktui.core.config import Config
from sparktui.service.replay import ReplaySource
from sparktui.tui.app import SparkTUI
from sparktui.tui.screens.main import MainScreen

REPLAY_BINDINGS: list[Binding] = [
    Binding("space", "replay_pause", "Pause", id="replay-pause", key_display="space",
            tooltip="Pause / resume the replay"),
    Binding("comma", "replay_step(-60)", "-1m", id="replay-back-1m", key_display=",",
            tooltip="Back one minute"),
    Binding("full_stop", "replay_step(60)", "+1m", id="replay-fwd-1m", key_display=".",
            tooltip="Forward one minute"),
    Binding("left_square_bracket", "replay_step(-600)", "-10m", id="replay-back-10m",
            key_display="[", tooltip="Back ten minutes"),
    Binding("right_square_bracket", "replay_step(600)", "+10m", id="replay-fwd-10m",
            key_display="]", tooltip="Forward ten minutes"),
    Binding("a", "replay_next_alert", "Next alert", id="replay-next-alert",
            tooltip="Jump to the next alert of the night"),
]
CLOCK_EVERY_S = 0.25


class ReplayApp(SparkTUI):
    BINDINGS: ClassVar[list[BindingType]] = [*SparkTUI.BINDINGS, *REPLAY_BINDINGS]
    ACKS_ALERTS = False
    READS_SWITCHES = False
    """The recording holds no switch states; nothing is asked of Home Assistant."""

    def __init__(self, config: Config, source: ReplaySource, *, tune_gc: bool = False) -> None:
        """``tune_gc``: the process is the replay's alone (the CLI), as the
        console's: its collector's full passes come on the console's timer,
        not right after a seek decoded its thousands of events."""
        super().__init__(config, source, read_only=True,  # type: ignore[arg-type]
                         tune_gc=tune_gc)
        self.source = source
        self._damaged = (0, 0)
        """Lines and pieces the recording's replay found damaged so far (each
        told once)."""

    def on_mount(self) -> None:
        """After SparkTUI's own on_mount (Textual calls each class's handler)."""
        damage = self.source.events.damage
        self._damaged = (damage.lines, damage.pieces)
        self._show_clock()
        self.set_interval(CLOCK_EVERY_S, self._show_clock, name="replay clock")

    def now(self) -> float:
        return self.source.now

    def _show_clock(self) -> None:
        s = self.source
        state = "PAUSED" if s.paused else "END" if s.at_end else f"x{s.speed:g}"
        clock = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(s.now))
        self.title = f"sparktui REPLAY {clock} UTC [{state}]"
        damage = s.events.damage
        lines, pieces = self._damaged
        if damage.lines > lines:  # found when the replay decoded them
            self.notify(f"{damage.lines - lines} recorded line(s) skipped: not events "
                        f"({s.events.path})", severity="warning")
        if damage.pieces > pieces:  # a piece the writer's index covered, found damaged
            self.notify(f"{damage.pieces - pieces} damaged piece(s) of the recording skipped "
                        f"({s.events.path})", severity="warning")
        self._damaged = (damage.lines, damage.pieces)

    async def _fresh_screen(self) -> None:
        """A new main screen (modals closed) for the state a seek reports."""
        while len(self.screen_stack) > 1:
            await self.pop_screen()
        self.main_screen = MainScreen()
        await self.push_screen(self.main_screen)

    async def _seek(self, t: float) -> None:
        was = self.source.paused
        self.source.paused = True  # nothing reaches the old screen while it goes
        await self._fresh_screen()
        self.source.seek(t)
        self.source.paused = was
        self._show_clock()

    def action_replay_pause(self) -> None:
        self.source.pause()
        self._show_clock()

    async def action_replay_step(self, seconds: float) -> None:
        await self._seek(self.source.now + seconds)

    async def action_replay_next_alert(self) -> None:
        t = self.source.next_alert_time()
        if t is None:
            self.notify("no alert after this moment", severity="warning")
            return
        await self._seek(t)
