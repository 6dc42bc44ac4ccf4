"""Issue 28 item 7, on the simulator: a FATAL stayed "1 acknowledged alert(s)
still active" after its lane was gone, and the sentinel's
`sparktui_alerts_active` kept counting it. The service clears a lane's
alerts when the lane is gone (`AlertCleared.why`: lane gone, before its
LaneGone), so every subscriber sees the same clear: the sentinel's lines and
its export, the phone (its recovery message, as for any clear), and a
console that attaches afterwards, which has no FATAL."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktui.adapters.endpoints import resolve_endpoints
from sparktui.core.notify import RECOVERY_HOLD_S
from sparktui.service.attach import socket_path
from sparktui.service.cluster import ClusterService
from sparktui.service.events import (
    LANE_GONE,
    AlertCleared,
    AlertRaised,
    LaneChanged,
    LaneGone,
    ServiceEvent,
)
from sparktui.service.export import FleetMetrics
from sparktui.sim.testing import connect

from .simnight import advance_until, boot_unwatched, night, phase, recording_sentinel, with_phone

LANE = "glm53-mxfp4-fp8-4x-r39-196k"  # 4nodes-switch-b, not protected
FATAL = f"fatal:{LANE}"


def active(metrics: FleetMetrics) -> dict[str, float]:
    family = next(m for m in metrics.collect() if m.name == "sparktui_alerts_active")
    return {s.labels["severity"]: s.value for s in family.samples}


async def test_a_lane_gone_clears_its_fatal_for_every_subscriber(tmp_path: Path) -> None:
    async with night(tmp_path, "normal", "4nodes-switch-b", start=False) as n:
        with_phone(n)
        ha = n.sim.ha
        assert ha is not None
        sentinel, lines = recording_sentinel(n)
        await boot_unwatched(n, LANE)
        stop = asyncio.Event()
        task = asyncio.create_task(sentinel.run(stop))
        console: ClusterService | None = None
        try:
            await advance_until(n, lambda: phase(n, LANE) == "serving", step=5.0,
                                max_sim_s=300, why=lambda: phase(n, LANE))
            # -- a worker rank killed (docker rm -f from a shell): FATAL, paged --------
            rank1 = next(r for r in n.service.lanes()[LANE].ranks if r.rank == 1)
            async with connect(n.sim, rank1.node) as conn:
                done = await conn.run(f"docker rm -f {rank1.container}", timeout=30)
                assert done.exit_status == 0, done.stderr
            await advance_until(n, lambda: FATAL in {a.key for a in n.service.alerts()},
                                step=1.0, max_sim_s=120, why=lambda: phase(n, LANE))
            await advance_until(n, lambda: any("FATAL" in str(x) for x in ha.notifications),
                                step=1.0, max_sim_s=60)
            metrics = FleetMetrics(n.config, n.sim.clock, n.service.recipes)
            for _, ev in n.events:
                metrics.observe(ev)
            assert active(metrics)["fatal"] == 1

            # -- the lane stopped: its alert cleared, with why, before it is gone --------
            preview = await n.service.preview_stop(LANE)
            assert preview.allowed and preview.run is not None, preview.refusals
            run = asyncio.create_task(preview.run())
            await advance_until(n, run.done, step=1.0, max_sim_s=600)
            assert run.result().ok, run.result().message
            await advance_until(n, lambda: phase(n, LANE) == "-", step=2.0, max_sim_s=300,
                                why=lambda: phase(n, LANE))
            events: list[ServiceEvent] = [ev for _, ev in n.events]
            cleared = [i for i, ev in enumerate(events)
                       if isinstance(ev, AlertCleared) and ev.key == FATAL]
            gone = [i for i, ev in enumerate(events) if isinstance(ev, LaneGone)
                    and ev.name == LANE]
            assert cleared and gone and cleared[0] < gone[0], (cleared, gone)
            assert events[cleared[0]] == AlertCleared(FATAL, why=LANE_GONE)
            assert FATAL not in {a.key for a in n.service.alerts()}
            # nothing of the lane after it: its other ranks' exits (the lane was over
            # at its FATAL) once came as views after the LaneGone, and put it back
            # into the sentinel's state, so an attaching console showed it again
            t0 = n.sim.clock.monotonic()
            await advance_until(n, lambda: n.sim.clock.monotonic() - t0 >= 30, step=5.0,
                                max_sim_s=60)
            assert not any(isinstance(ev, LaneChanged | AlertRaised) and LANE in str(ev)
                           for _, ev in n.events[gone[0]:]), n.events[gone[0]:]
            assert f"cleared {FATAL} ({LANE_GONE})" in lines, lines[-10:]
            metrics = FleetMetrics(n.config, n.sim.clock, n.service.recipes)
            for ev in events:  # what the sentinel's exporter observed, in order
                metrics.observe(ev)
            assert active(metrics)["fatal"] == 0

            # -- a console attaching now has no FATAL --------------------------------
            console = ClusterService(n.config, clock=n.sim.clock,
                                     endpoints=resolve_endpoints(n.config),
                                     sentinel=socket_path(n.config.state_dir()))
            heard: list[ServiceEvent] = []
            await console.start(heard.append)
            assert console.attached.startswith("attached to sentinel")
            # its replay of the night told (the FATAL's clear is its last alert event;
            # an earlier clear in the replay is no sign the FATAL's has come)
            await advance_until(n, lambda: any(isinstance(e, AlertCleared) and e.key == FATAL
                                               for e in heard), step=1.0, max_sim_s=120)
            assert FATAL not in {a.key for a in console.alerts()}
            assert LANE not in console.lanes()
            raised = [i for i, e in enumerate(heard)
                      if isinstance(e, AlertRaised) and e.alert.key == FATAL]
            assert all(any(isinstance(e, AlertCleared) and e.key == FATAL
                           for e in heard[i:]) for i in raised)

            # -- the phone: its recovery message, as any clear's, with why ----------
            await advance_until(n, lambda: any("RECOVERED FATAL" in str(x)
                                               for x in ha.notifications),
                                step=5.0, max_sim_s=RECOVERY_HOLD_S + 30)
            recovered = [x for x in ha.notifications if "RECOVERED FATAL" in str(x)]
            assert len(recovered) == 1 and f"fatal is over ({LANE_GONE})" in str(recovered[0])
        finally:
            if console is not None:
                await console.stop()
            stop.set()
            await asyncio.wait_for(task, 60)
