"""`sparktui stop` from another process while a console watches the lane
(against the simulator): the console's watcher learns of the stop from the
journal's stop intent (on disk before the first ``docker stop``), so the
ranks' exits and the shutdown's fatal lines never flash a fatal alert; the
lane shows "stopping"/"stopped" until it is gone. Ten boots stopped at
different points of their load, and a serving lane (endpoint checks and the
canary running)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktui.core.logsig import Phase
from sparktui.ops.context import open_runtime
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.stop import Stop
from sparktui.service.events import AlertRaised, LaneChanged, LaneGone

from ..service.simnight import Night, advance_until, boot_unwatched, night, phase, start_lane

LANE = "glm53-mxfp4-fp8-4x-r39-196k"  # 4nodes-switch-b: dgx5 (head) .. dgx8, not protected
RUNS = 10


async def stop_from_the_cli(n: Night, run: int) -> None:
    """``sparktui stop LANE`` in another process: its own connections, its own
    journal writer, no lane watchers; then until the console drops the lane.
    Neither a fatal alert nor a failed phase on the way."""
    first = len(n.events)
    async with open_runtime(n.config, clock=n.sim.clock) as rt:
        stop = asyncio.create_task(execute(rt.ops, await prepare(rt.ops, Stop(LANE))))
        await advance_until(n, stop.done, step=1.0, max_sim_s=900)
        assert stop.result().ok, (run, stop.result().message)
    # every rank gone after the stop: "stopped" (or the lane already dropped)
    await advance_until(
        n, lambda: phase(n, LANE) == "stopped" or any(
            isinstance(e, LaneGone) and e.name == LANE for _, e in n.events[first:]),
        step=2.0, max_sim_s=300, why=lambda: phase(n, LANE))
    events = [e for _, e in n.events[first:]]
    fatal = [e.alert for e in events if isinstance(e, AlertRaised) and e.alert.subject == LANE]
    assert not fatal, (run, fatal)
    phases = [e.lane.phase for e in events
              if isinstance(e, LaneChanged) and e.lane.name == LANE]
    assert phases[-1] in ("stopping", "stopped"), (run, phases)
    assert "failed" not in phases, (run, phases)


async def test_a_stop_from_another_process_is_stopped_never_fatal(tmp_path: Path) -> None:
    """Ten boots, each stopped from the CLI at a different point of its load."""
    async with night(tmp_path, "normal", "4nodes-switch-b") as n:
        for run in range(RUNS):
            await start_lane(n, LANE)
            await advance_until(n, lambda: phase(n, LANE) == Phase.LOADING, step=5.0,
                                max_sim_s=1800, why=lambda: phase(n, LANE))
            for _ in range(run % 4):  # stop at different points of the load
                await n.sim.advance(7.0)
                await asyncio.sleep(0.01)
            await stop_from_the_cli(n, run)
            # the lane dropped: its next boot gets a watcher of its own
            await advance_until(n, lambda: phase(n, LANE) == "-", step=2.0, max_sim_s=900,
                                why=lambda: phase(n, LANE))


async def test_a_serving_lane_stopped_from_another_process_is_stopped_never_fatal(
        tmp_path: Path) -> None:
    """The console's usual case at night: the lane serves (endpoint checks and
    the canary running) when someone stops it from a shell."""
    async with night(tmp_path, "normal", "4nodes-switch-b", start=False) as n:
        await boot_unwatched(n, LANE)
        await n.service.start(n.record)
        await advance_until(n, lambda: phase(n, LANE) == Phase.SERVING, step=5.0,
                            max_sim_s=1800, why=lambda: phase(n, LANE))
        served = n.sim.clock.monotonic()
        await advance_until(n, lambda: n.sim.clock.monotonic() - served >= 60, step=5.0,
                            max_sim_s=120)  # endpoint checks and canary rounds meanwhile
        await stop_from_the_cli(n, 0)
