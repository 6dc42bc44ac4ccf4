"""After a bad night the console pushed one resume modal per unfinished
workflow, each of which could only be closed before the next showed: one
screen now lists them all, each choosable (complete it, close it), and
"later" leaves them all for now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from textual.widgets import Button

from sparktui.ops.journal import Journal
from sparktui.tui.screens.confirm import ConfirmActionScreen
from sparktui.tui.screens.info import ResumeScreen

from .harness import EPOCH, build, wait_for
from .screen_text import screen_text

SMALL = (80, 24)


class At:
    """The console's clock in these tests (not the system's): its records
    are aged on it."""

    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def bad_night(state_dir: Path) -> None:
    """Three workflows killed in one night: a cycle with its plug off, a stop,
    a cluster power-off with one plug cut."""
    j = Journal.in_state_dir(state_dir, At(EPOCH - 900))
    gone = {"pid": dead_pid(), "pid_started": 1.0}
    j.append("cycle-1", "begin", workflow="power-cycle", target="dgx7",
             detail={"off_seconds": 30, **gone})
    j.append("cycle-1", "intent", workflow="power-cycle", target="switch.dgx7", step="plug off")
    j.append("cycle-1", "outcome", target="switch.dgx7", step="plug off", ok=True)
    j.append("stop-1", "begin", workflow="stop", target="lane-x", detail=gone)
    j.append("stop-1", "intent", workflow="stop", target="dgx6", step="stop rank 1")
    j.append("off-1", "begin", workflow="cluster-power-off", target="4nodes-switch-b",
             detail={"nodes": ["dgx5", "dgx6"], **gone})
    j.append("off-1", "intent", workflow="cluster-power-off", target="switch.dgx5",
             step="plug off")
    j.append("off-1", "outcome", target="switch.dgx5", step="plug off", ok=True)


def resume_screens(app) -> list[ResumeScreen]:  # type: ignore[no-untyped-def]
    return [s for s in app.screen_stack if isinstance(s, ResumeScreen)]


async def test_one_screen_lists_every_unfinished_workflow(tmp_path: Path) -> None:
    bad_night(tmp_path)
    c = build(state_dir=tmp_path)
    async with c.app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: isinstance(c.app.screen, ResumeScreen))
        await pilot.pause(0.2)
        assert len(resume_screens(c.app)) == 1, c.app.screen_stack
        text = screen_text(c.app)
        assert "UNFINISHED: 3 workflows the journal says never ended" in text, text
        for line in ("power-cycle dgx7 · stale · off: switch.dgx7", "stop lane-x · stale · "
                     "close only", "cluster-power-off 4nodes-switch-b · stale · off: switch.dgx5"):
            assert line in text, text
        screen = c.app.screen
        assert "read switch.dgx7: if it reads off" in " ".join(screen_text(c.app).split())
        await pilot.press("down")  # the stop: nothing to redo, only closable
        await pilot.pause(0.1)
        assert "nothing to redo: it can only be closed" in screen_text(c.app)
        assert not screen.query_one("#resume", Button).display
        await pilot.press("tab", "enter")  # Later -> Close it
        await wait_for(pilot, lambda: not any(o.record.wf == "stop-1"
                                               for o in c.service.unfinished()))
        await wait_for(pilot, lambda: isinstance(c.app.screen, ResumeScreen)
                       and c.app.screen is not screen)
        again = c.app.screen
        assert isinstance(again, ResumeScreen) and len(resume_screens(c.app)) == 1
        assert [o.record.wf for o in again.offers] == ["cycle-1", "off-1"]
        await pilot.press("escape")  # later, for all of them
        await wait_for(pilot, lambda: not resume_screens(c.app))
        assert [o.record.wf for o in c.service.unfinished()] == ["cycle-1", "off-1"]


async def test_completing_one_keeps_the_others_listed_under_its_confirm(tmp_path: Path) -> None:
    bad_night(tmp_path)
    c = build(state_dir=tmp_path)
    async with c.app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: isinstance(c.app.screen, ResumeScreen))
        await pilot.press("down", "down")  # the cluster power-off
        await pilot.press("tab", "tab", "enter")  # Later -> Close it -> Complete it…
        await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen),
                       timeout=15)
        assert "Complete cluster-power-off 4nodes-switch-b" in screen_text(c.app)
        (under,) = resume_screens(c.app)
        assert [o.record.wf for o in under.offers] == ["cycle-1", "stop-1"]
        await pilot.press("escape")  # not now: the others are there again
        await wait_for(pilot, lambda: c.app.screen is under)
