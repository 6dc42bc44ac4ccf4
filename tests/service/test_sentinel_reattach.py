"""Issue 25 without a simulator: a console that lost its sentinel twice
re-attaches twice. Each time it watched alone (its own poller, its own
thrash alert for a node it saw starve); each time a sentinel is back, its
own watch stops (no probe from it after that, no task of watching alone
left), its own alert and the lost alert are cleared, and it shows exactly
the new sentinel's alerts. A workflow the console started while alone runs
to its end on its own watch before the console re-attaches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from sparktui.core.clock import SystemClock
from sparktui.core.config_load import load_config
from sparktui.ops.events import WorkflowStarted
from sparktui.service.attach import LOST_KEY, SentinelHub, socket_path
from sparktui.service.cluster import ClusterService
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    ServiceEvent,
    WorkflowProgressed,
)

from ..tui.fakecluster import GIB_KIB, FakePower, fake_endpoints, fake_fleet
from ..tui.harness import ROOT, ScaledClock


async def until(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.01)


async def test_a_console_re_attaches_each_time_a_sentinel_is_back(tmp_path: Path) -> None:
    config = load_config(ROOT / "config.toml")
    fleet = fake_fleet(config)
    path = socket_path(tmp_path)
    hub = SentinelHub(path, clock=SystemClock(), pid=100)
    await hub.start()
    events: list[ServiceEvent] = []
    service = ClusterService(config, links=fleet, endpoints=fake_endpoints(config),
                             clock=ScaledClock(10.0), liveness=fleet.alive,
                             power=FakePower(fleet, config), sentinel=path,
                             state_dir=tmp_path / "state")
    await service.start(events.append)

    def keys() -> set[str]:
        return {a.key for a in service.alerts()}

    def probes() -> int:
        return sum(n.probes for n in fleet.nodes.values())

    try:
        assert service.attached == "attached to sentinel (pid 100)"
        for cycle in (1, 2):
            await hub.close()  # the sentinel stops
            await until(lambda: LOST_KEY in keys() and not service.attached)
            starved = fleet.nodes["dgx6"]
            starved.avail_kib, starved.psi_some, starved.psi_full = 2 * GIB_KIB, 95.0, 70.0
            await until(lambda: "thrash:dgx6" in keys())  # its own detector's
            assert service._alone and not any(t.done() for t in service._alone)
            alone = list(service._alone)

            hub = SentinelHub(path, clock=SystemClock(), pid=100 + cycle)
            theirs = Alert("fatal:some-lane", "fatal", "some-lane", ("rank 0: EngineDead",),
                           "stop some-lane")
            hub.publish(AlertRaised(theirs))
            await hub.start()
            mark = f"attached to sentinel (pid {100 + cycle})"
            await until(lambda m=mark: service.attached == m)  # type: ignore[misc]
            await until(lambda c=cycle: events.count(AlertCleared(LOST_KEY)) == c)  # type: ignore[misc]
            assert keys() == {"fatal:some-lane"}  # its own thrash alert cleared with the lost one
            assert AlertCleared("thrash:dgx6") in events
            assert all(t.done() for t in alone) and not service._alone
            assert service.poller is not None and not service.poller._tasks
            polled = probes()
            await asyncio.sleep(0.5)  # 25 poll intervals on its clock
            assert probes() == polled
            starved.avail_kib, starved.psi_some, starved.psi_full = 110 * GIB_KIB, 0.0, 0.0
        raised_lost = [e for e in events if isinstance(e, AlertRaised) and e.alert.key == LOST_KEY]
        assert len(raised_lost) == 2
    finally:
        await service.stop()
        await hub.close()


async def test_no_re_attach_while_a_workflow_of_the_console_runs(tmp_path: Path) -> None:
    """A power cycle the console started while it watched alone runs on its
    own watch to the end: the console re-attaches only after it finished."""
    config = load_config(ROOT / "config.toml")
    fleet = fake_fleet(config)
    path = socket_path(tmp_path)
    hub = SentinelHub(path, clock=SystemClock(), pid=200)
    await hub.start()
    events: list[ServiceEvent] = []
    service = ClusterService(config, links=fleet, endpoints=fake_endpoints(config),
                             clock=ScaledClock(200.0), liveness=fleet.alive,
                             power=FakePower(fleet, config), sentinel=path,
                             state_dir=tmp_path / "state")
    await service.start(events.append)
    try:
        await hub.close()
        await until(lambda: LOST_KEY in {a.key for a in service.alerts()})
        await until(lambda: all(s.online for s in service.snapshot().nodes))  # its own poller
        preview = await service.preview_power_cycle("dgx8")
        assert preview.allowed and preview.run is not None
        run = asyncio.create_task(preview.run())
        await until(lambda: any(isinstance(e, WorkflowProgressed)
                                and isinstance(e.event, WorkflowStarted) for e in events))
        hub = SentinelHub(path, clock=SystemClock(), pid=201)
        await hub.start()
        attached_while_running = False
        async with asyncio.timeout(20):
            while not run.done():
                attached_while_running |= bool(service.attached)
                await asyncio.sleep(0.005)
        assert run.result().ok, run.result().message
        assert not attached_while_running
        await until(lambda: service.attached == "attached to sentinel (pid 201)")
    finally:
        await service.stop()
        await hub.close()
