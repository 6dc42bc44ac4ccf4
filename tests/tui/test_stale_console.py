"""The console after a crash: a run lock and an unfinished workflow whose
process is gone are shown stale, with the pid and the age (issue 25)."""

from __future__ import annotations

import os
import subprocess
import sys

from sparktui.ops.journal import Journal
from sparktui.ops.runlocks import RunLocks
from sparktui.tui.screens.info import ResumeScreen

from .harness import build, wait_for
from .screen_text import screen_text


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


async def test_a_dead_workflows_lock_and_record_read_stale(tmp_path):
    gone = dead_pid()
    journal = Journal.in_state_dir(tmp_path)
    journal.append("stop-1", "begin", workflow="stop", target="lane-x",
                   detail={"pid": gone, "pid_started": 1.0})
    journal.append("stop-1", "intent", workflow="stop", target="dgx6", step="stop rank 1",
                   action="docker stop -t 30 sparktui-lane-x-r1")
    locks = RunLocks.in_state_dir(tmp_path)
    locks.acquire(["dgx6"], wf="stop-1", workflow="stop", target="lane-x", started_at=1.0,
                  pid=gone)
    locks.acquire(["dgx7"], wf="serve-2", workflow="serve", target="lane-y", started_at=1.0)
    c = build(state_dir=tmp_path)
    async with c.app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(c.app.screen, ResumeScreen))
        text = screen_text(c.app)
        assert "UNFINISHED: stop lane-x" in text
        assert f"(pid {gone}) is gone" in text.replace("\n", " ")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(c.app.screen, ResumeScreen))
        c.app.show_runlocks()
        await wait_for(pilot, lambda: "Run locks" in screen_text(c.app))
        text = " ".join(screen_text(c.app).split())
        assert f"dgx6: STALE: stop lane-x (stop-1, pid {gone} on" in text
        assert f"pid {gone} is gone, taken" in text and "it holds nothing" in text
        assert f"dgx7: held: serve lane-y (serve-2, pid {os.getpid()} on" in text
