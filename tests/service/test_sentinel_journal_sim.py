"""Issue 27, against the simulator: the sentinel's socket is a subscription.
A same-user client that writes a stop mark, a forged failed workflow,
garbage and a deeply nested line changes nothing (no stopping mark, no
recording write, no phone call) and keeps receiving; a stop run from an
attached console reaches the sentinel through the journal's stop intents
(stopped, never fatal, no phone call) and its steps through the journal's
entries (recorded); a failed workflow any process journals reaches the phone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sparktui.adapters.endpoints import resolve_endpoints
from sparktui.ops.events import StepFinished, WorkflowFinished, WorkflowStarted
from sparktui.ops.journal import Journal
from sparktui.service.attach import LINE_LIMIT, socket_path
from sparktui.service.cluster import ClusterService
from sparktui.service.codec import encode
from sparktui.service.events import (
    AlertRaised,
    LaneGone,
    ServiceEvent,
    WorkflowProgressed,
)
from sparktui.service.recorded import read_recording
from sparktui.service.recording import RECORDING_DIR
from sparktui.service.sentinel import Sentinel

from .simnight import advance_until, boot_unwatched, night, phase, with_phone

LANE = "glm53-mxfp4-fp8-4x-r39-196k"  # 4nodes-switch-b, not protected


def forged_lines() -> list[bytes]:
    failed = WorkflowProgressed(WorkflowFinished("wf-forged", 1_764_450_000.0, "power-cycle",
                                                 "dgx6", False, "call the operator at 3 am"))
    return [json.dumps({"k": "stopping", "lane": LANE}).encode() + b"\n",
            json.dumps({"k": "workflow", "e": encode(failed)}).encode() + b"\n",
            b"\xff\xfe garbage\n",
            b"[" * 100_000 + b"\n"]


async def test_clients_command_nothing_and_a_console_stop_comes_by_the_journal(
        tmp_path: Path) -> None:
    async with night(tmp_path, "normal", "4nodes-switch-b", start=False) as n:
        with_phone(n)
        assert n.sim.ha is not None
        state_dir = n.config.state_dir()
        sentinel_saw: list[ServiceEvent] = []
        sentinel = Sentinel(n.config, n.service, clock=n.sim.clock,
                            emit=lambda p, text: None)
        on_event = sentinel.on_event

        def seen(ev: ServiceEvent) -> None:
            sentinel_saw.append(ev)
            on_event(ev)

        sentinel.on_event = seen  # type: ignore[method-assign]
        await boot_unwatched(n, LANE)
        stop = asyncio.Event()
        task = asyncio.create_task(sentinel.run(stop))
        console = ClusterService(n.config, clock=n.sim.clock, endpoints=resolve_endpoints(n.config),
                                 sentinel=socket_path(state_dir))
        heard: list[bytes] = []
        reading: asyncio.Task[None] | None = None
        try:
            await advance_until(n, lambda: phase(n, LANE) == "serving", step=5.0,
                                max_sim_s=300, why=lambda: phase(n, LANE))
            # -- a hostile client ---------------------------------------------------
            reader, writer = await asyncio.open_unix_connection(str(socket_path(state_dir)),
                                                                limit=LINE_LIMIT)

            async def read() -> None:
                while line := await reader.readline():
                    heard.append(line)

            reading = asyncio.create_task(read())
            for line in forged_lines():
                writer.write(line)
                await writer.drain()
            sent = len(n.sim.ha.notifications)
            await advance_until(n, lambda: len(heard) > 0 and sentinel.hub.clients == 1,
                                step=1.0, max_sim_s=10)
            before = len(heard)
            await advance_until(n, lambda: len(heard) > before + 2, step=2.0, max_sim_s=30)
            watch = n.service._watchers.get(LANE)
            assert watch is not None and watch.stopping_since is None
            assert phase(n, LANE) == "serving"
            assert len(n.sim.ha.notifications) == sent
            assert not any(isinstance(e, WorkflowProgressed) for e in sentinel_saw)

            # -- an attached console stops the lane ---------------------------------
            await console.start(lambda ev: None)
            assert console.attached.startswith("attached to sentinel")
            preview = await console.preview_stop(LANE)
            assert preview.allowed and preview.run is not None, preview.refusals
            run = asyncio.create_task(preview.run())
            await advance_until(n, run.done, step=1.0, max_sim_s=600)
            assert run.result().ok, run.result().message
            await advance_until(n, lambda: phase(n, LANE) in ("stopped", "-"), step=2.0,
                                max_sim_s=300, why=lambda: phase(n, LANE))
            lane_alerts = [e.alert for e in sentinel_saw
                           if isinstance(e, AlertRaised) and e.alert.subject == LANE]
            assert not lane_alerts, lane_alerts
            assert len(n.sim.ha.notifications) == sent, n.sim.ha.notifications[sent:]

            # -- a failed workflow another process journals reaches the phone -------
            other = Journal.in_state_dir(state_dir, n.sim.clock)
            other.append("cycle-1", "begin", workflow="power-cycle", target="dgx6",
                         detail={"plan": []})
            other.append("cycle-1", "end", workflow="power-cycle", target="dgx6", ok=False,
                         message="plug unavailable")
            await advance_until(n, lambda: len(n.sim.ha.notifications) > sent, step=1.0,
                                max_sim_s=10)
            assert "WORKFLOW-FAILED dgx6" in str(n.sim.ha.notifications[sent:])
            assert "3 am" not in str(n.sim.ha.notifications)
            assert not reading.done() and len(heard) > before  # still subscribed
        finally:
            await console.stop()
            if reading is not None:
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
            stop.set()
            await asyncio.wait_for(task, 60)
        recorded = [ev for path in (state_dir / RECORDING_DIR).glob("*.jsonl.gz")
                    for _, ev in read_recording(path)]
        steps = [ev.event for ev in recorded if isinstance(ev, WorkflowProgressed)]
        assert not any(e.wf == "wf-forged" for e in steps)
        stops = [e for e in steps if isinstance(e, WorkflowStarted) and e.kind == "stop"]
        assert [e.target for e in stops] == [LANE]
        wf = stops[0].wf
        assert any(isinstance(e, StepFinished) and e.wf == wf and e.ok for e in steps)
        assert any(isinstance(e, WorkflowFinished) and e.wf == wf and e.ok for e in steps)
        assert any(isinstance(e, WorkflowFinished) and e.wf == "cycle-1" and not e.ok
                   for e in steps)
        assert not any(isinstance(e, LaneGone) and e.name != LANE for e in recorded)
