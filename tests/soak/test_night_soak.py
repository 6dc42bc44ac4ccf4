"""A simulated whole night of the console's service on the normal scenario
(issue 25: an idle, qualified lane was raised UNRESPONSIVE five times in one
night, each cleared minutes later; "thrash suspected" rose after every plug
cycle). NIGHT_S of the simulator's clock, driven step by step (manual clock,
real SSH and HTTP to the simulator on loopback): a lane served and watched
all night with its canary rounds, endpoint checks, node polls and thrash
rules. Done when not one alert was raised.

Not yet here (issue 25's full soak): a console attached over the sentinel's
socket, stops and re-serves and qualify runs during the night, and the
long-prompt incident night's exact THRASH/FATAL list (tests/service/
test_night_sim.py has the incident's first part). The false-alert figure
with the host loaded is this test run beside a CPU hog (see the report)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sparktui.service.events import AlertRaised

from ..service.simnight import advance_until, boot_unwatched, night, phase

NIGHT_S = 8 * 3600.0
"""Simulated seconds of the night (the issue: >= 8 simulated hours)."""
STEP_S = 60.0
"""Simulated seconds per step: coarse, but every canary round (60 s) runs
and finishes in real HTTP between steps (30 s steps took 223 s of wall on
the shared 2-core host: too close to the bound)."""
LANE = "glm53-flash-eugr-2x"


@pytest.mark.timeout(360)
async def test_a_normal_night_raises_no_alert(tmp_path: Path) -> None:
    async with night(tmp_path, "normal", "2nodes-dac", start=False,
                     poll_interval_s=60.0) as n:
        await boot_unwatched(n, LANE)
        await n.service.start(n.record)
        await advance_until(n, lambda: phase(n, LANE) == "serving", step=5.0,
                            max_sim_s=300, why=lambda: phase(n, LANE))
        began, wall = n.sim.clock.monotonic(), time.monotonic()
        seen: set[str] = set()

        def watch() -> bool:
            view = n.service.lanes()[LANE]
            seen.add(view.phase)
            return n.sim.clock.monotonic() - began >= NIGHT_S

        await advance_until(n, watch, step=STEP_S, max_sim_s=NIGHT_S + STEP_S)
        raised = [(t - began, e.alert.key, e.alert.evidence) for t, e in n.events
                  if isinstance(e, AlertRaised)]
        canary = n.service.lanes()[LANE].canary
        print(f"night: {NIGHT_S / 3600:g} simulated h in {time.monotonic() - wall:.0f} s wall, "
              f"{len(raised)} alert(s), phases {sorted(seen)}, canary {canary}")
        assert raised == []
        assert seen == {"serving"}
        assert canary and "1-token completion answered" in canary[0]
