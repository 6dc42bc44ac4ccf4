"""ClusterService without the UI: events to a plain list, previews built by
the ops layer, workflows run, every task cancelled by stop()."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from sparktui.core.clock import SystemClock
from sparktui.core.config_load import load_config
from sparktui.core.state import NodeState
from sparktui.ops.events import WorkflowFinished
from sparktui.ops.journal import Journal
from sparktui.ops.lanes import discover_lanes
from sparktui.service.cluster import ClusterService
from sparktui.service.events import (
    AlertRaised,
    LaneChanged,
    LogLinesArrived,
    NodeSampled,
    ServiceEvent,
    WorkflowProgressed,
)

from ..fixtures.clocks import SimAt, WallAt
from ..tui.fakecluster import GIB_KIB, FakePower, add_lane, fake_endpoints, fake_fleet, ts
from ..tui.harness import EPOCH, ScaledClock

ROOT = Path(__file__).resolve().parents[2]


def make(tmp_path: Path, speed: float = 0.0):  # type: ignore[no-untyped-def]
    config = load_config(ROOT / "config.toml")
    fleet = fake_fleet(config)
    power = FakePower(fleet, config)
    service = ClusterService(config, links=fleet, endpoints=fake_endpoints(config),
                             clock=ScaledClock(speed), liveness=fleet.alive,
                             power=power, state_dir=tmp_path)
    return config, fleet, power, service


async def until(predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    end = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < end, "condition not reached"
        await asyncio.sleep(0.01)


async def test_snapshots_lanes_and_logs_reach_the_sink(tmp_path: Path) -> None:
    config, fleet, _, service = make(tmp_path)
    ranks = add_lane(fleet, "glm53-flash-eugr-2x", "4nodes-switch-b", ["dgx5", "dgx6"])
    ranks[1].log.put_nowait(f"{ts(1)} (EngineCore_DP0 pid=312) INFO 11-29 22:40:01 "
                            "[gpu_model_runner.py:2000] Starting to load model x...")
    events: list[ServiceEvent] = []
    await service.start(events.append)
    try:
        await until(lambda: sum(isinstance(e, NodeSampled) for e in events) >= 8
                    and any(isinstance(e, LogLinesArrived) for e in events))
        sampled = {e.snapshot.node for e in events if isinstance(e, NodeSampled)}
        assert sampled == set(config.nodes)
        lane = [e.lane for e in events if isinstance(e, LaneChanged)][-1]
        assert lane.name == "glm53-flash-eugr-2x" and lane.cluster == "4nodes-switch-b"
        assert lane.nodes == ("dgx5", "dgx6") and lane.protected  # guards.protected_lanes
        logs = [e for e in events if isinstance(e, LogLinesArrived)]
        assert logs[0].rank == 1 and logs[0].end == 1
        assert service.log_tail("glm53-flash-eugr-2x", 1)[1] == 1
    finally:
        await service.stop()
    assert not service._tasks and not service._lanes


async def test_stop_cancels_every_task_it_started(tmp_path: Path) -> None:
    _, fleet, _, service = make(tmp_path)
    add_lane(fleet, "glm53-flash-eugr-2x", "4nodes-switch-b", ["dgx5"])
    before = set(asyncio.all_tasks())
    await service.start(lambda e: None)
    await until(lambda: bool(service.lanes()))
    started = set(asyncio.all_tasks()) - before
    assert len(started) >= 8 + 2  # a poll loop per node, snapshots, journals, the lane
    await service.stop()
    await asyncio.sleep(0)
    assert all(t.done() for t in started)


async def test_thrash_alert_carries_evidence(tmp_path: Path) -> None:
    _, fleet, _, service = make(tmp_path)
    node = fleet.nodes["dgx7"]
    node.avail_kib, node.psi_some, node.psi_full = int(2.0 * GIB_KIB), 60.0, 40.0
    events: list[ServiceEvent] = []
    await service.start(events.append)
    try:
        await until(lambda: any(isinstance(e, AlertRaised) for e in events))
        alert = next(e.alert for e in events if isinstance(e, AlertRaised))
        assert alert.key == "thrash:dgx7" and alert.level == "thrash suspected"
        assert any("PSI full avg10 40.0%" in line for line in alert.evidence)
        assert alert.next_step
    finally:
        await service.stop()


async def test_previews_come_from_the_ops_guards(tmp_path: Path) -> None:
    _, fleet, _, service = make(tmp_path)
    add_lane(fleet, "glm53-flash-eugr-2x", "4nodes-switch-b", ["dgx5", "dgx6"])
    await service.start(lambda e: None)
    try:
        await until(lambda: bool(service.lanes()))
        cycle = await service.preview_power_cycle("dgx1")
        assert not cycle.allowed and cycle.run is None
        assert cycle.refusals[0].guard == "protected-node"
        stop = await service.preview_stop("glm53-flash-eugr-2x")
        assert not stop.allowed and stop.refusals[0].guard == "protected-lane"
        # dgx6 is not protected, but it runs a rank of a protected lane: the console
        # refuses exactly as the CLI and the run do (the plan is the same object)
        on_lane = await service.preview_recover("dgx6")
        assert not on_lane.allowed and on_lane.refusals[0].guard == "protected-lane"
        assert on_lane.plan is not None and on_lane.plan.report is on_lane.report
        recover = await service.preview_recover("dgx7")
        assert recover.allowed and recover.confirmation.typed
        assert [s.step for s in recover.steps][:3] == ["ssh retry 1", "ssh retry 2",
                                                         "ssh retry 3"]
        off = await service.preview_cluster_power("4nodes-switch-b", on=False)
        assert not off.allowed  # dgx5/dgx6 still run the (protected) lane
        assert any(v.guard == "protected-lane" for v in off.refusals)
    finally:
        await service.stop()


async def test_power_cycle_runs_the_workflow_and_reports_progress(tmp_path: Path) -> None:
    _, _, power, service = make(tmp_path, speed=200.0)
    events: list[ServiceEvent] = []
    await service.start(events.append)
    try:
        await until(lambda: all(s.state is NodeState.ONLINE for s in service.snapshot().nodes))
        preview = await service.preview_power_cycle("dgx8")
        assert preview.allowed and preview.entities == ("switch.dgx8",)
        assert preview.run is not None
        result = await asyncio.wait_for(preview.run(), 20)
        assert result.ok, result.message
        assert power.calls == [("turn_off", "switch.dgx8"), ("turn_on", "switch.dgx8")]
        progressed = [e.event for e in events if isinstance(e, WorkflowProgressed)]
        assert isinstance(progressed[-1], WorkflowFinished) and progressed[-1].ok
        assert not service.unfinished()
    finally:
        await service.stop()


def test_lane_discovery_from_labels() -> None:
    from sparktui.core.probe import parse_probe
    from sparktui.core.state import ClusterSnapshot, NodeSnapshot

    config = load_config(ROOT / "config.toml")
    fleet = fake_fleet(config)
    add_lane(fleet, "glm53-mxfp4-fp8-4x-r39", "4nodes-switch-b", ["dgx5", "dgx6", "dgx7"])
    snaps = tuple(NodeSnapshot(n, NodeState.ONLINE, 0.0,
                               probe=parse_probe(fleet.nodes[n].probe_text()))
                  for n in config.nodes)
    snapshot = ClusterSnapshot(0.0, snaps)
    lanes = discover_lanes(snapshot)
    assert list(lanes) == ["glm53-mxfp4-fp8-4x-r39"]
    assert [(r.rank, r.node) for r in lanes["glm53-mxfp4-fp8-4x-r39"]] == [
        (0, "dgx5"), (1, "dgx6"), (2, "dgx7")]



@pytest.mark.parametrize("on_wall", [False, True], ids=["demo", "wall"])
async def test_the_shift_log_takes_its_window_on_each_clock(tmp_path: Path,
                                                            on_wall: bool) -> None:
    """The console's shift log (the last 16 h) windows each clock on its own,
    as `sparktui shiftlog --since 16h` does (tests/ops/test_shiftlog_clocks.py):
    it subtracted 16 h from its own clock's now and compared that with every
    entry, so a demo's console kept a shell's entries of days ago and a wall
    console dropped every entry of the demo's (days behind)."""
    config = load_config(ROOT / "config.toml")
    fleet = fake_fleet(config)
    clock = SystemClock() if on_wall else ScaledClock()
    service = ClusterService(config, links=fleet, endpoints=fake_endpoints(config),
                             clock=clock, liveness=fleet.alive, state_dir=tmp_path)
    wall, sim = time.time(), EPOCH
    await service.start(lambda e: None)
    try:
        assert service.ops is not None
        path = service.ops.journal.path
        for wf, stamp in (("old-sim", SimAt(sim - 17 * 3600)), ("new-sim", SimAt(sim)),
                          ("old-wall", WallAt(wall - 17 * 3600)), ("new-wall", WallAt(wall - 60))):
            j = Journal(path, stamp)
            j.append(wf, "begin", workflow="stop", target=wf)
            j.append(wf, "end", workflow="stop", target=wf, ok=True, message="stopped")
        text = service.shift_log()
    finally:
        await service.stop()
    assert "stop new-sim" in text and "stop new-wall" in text, text
    assert "old-sim" not in text and "old-wall" not in text, text
