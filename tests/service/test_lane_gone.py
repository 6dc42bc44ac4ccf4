"""A lane leaves the service's list only once its watcher said how it ended:
the watcher is the one truth of a lane's phase, and a poll that no longer
lists the lane's containers (docker rm) may run ahead of the watcher's
follower, which has not yet seen its rank's stream end."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.service import lane_feed
from sparktui.service.events import LaneChanged, LaneGone, NodeSampled, ServiceEvent

from ..tui.fakecluster import add_lane, vllm_boot_lines
from .test_cluster_service import make, until

LANE = "glm53-flash-eugr-2x"
SPEED = 50.0
"""Simulated seconds per real second: a 2 s poll is 40 ms, the 15 s slow
tier (containers) 0.3 s."""


def story(events: list[ServiceEvent]) -> list[str]:
    """The lane's phases as reported, then ``gone``."""
    out: list[str] = []
    for e in events:
        said = e.lane.phase if isinstance(e, LaneChanged) and e.lane.name == LANE \
            else "gone" if isinstance(e, LaneGone) and e.name == LANE else None
        if said is not None and (not out or out[-1] != said):
            out.append(said)
    return out


async def stopped_and_removed(tmp_path: Path, events: list[ServiceEvent]):  # type: ignore[no-untyped-def]
    """A loading lane the service watches, told stopping (as the stop workflow
    does before its first `docker stop`), then removed from every node's
    container list while its rank's log stream is still open; returns after
    polls have listed the node's containers without it."""
    _, fleet, _, service = make(tmp_path, speed=SPEED)
    (rank0,) = add_lane(fleet, LANE, "4nodes-switch-b", ["dgx5"])
    for line in vllm_boot_lines(upto="loading"):
        rank0.log.put_nowait(line)
    await service.start(events.append)
    view = lambda: service.lanes().get(LANE)  # noqa: E731
    await until(lambda: (v := view()) is not None and v.phase == "loading weights")
    assert service.ops is not None and service.ops.lane_watchers is not None
    service.ops.lane_watchers.stopping(LANE)
    await until(lambda: (v := view()) is not None and v.phase == "stopping")
    fleet.nodes["dgx5"].containers.remove(rank0)
    removed = service.clock.time()
    assert service.poller is not None
    for node in fleet.nodes:  # as the stop's steps do: their containers read again
        service.poller.refresh(node)
    sampled = lambda: sum(isinstance(e, NodeSampled) for e in events)  # noqa: E731
    await until(lambda: all(s.listed_since() > removed for s in service.snapshot().nodes))
    later = sampled() + 16  # two more rounds of the eight nodes: each syncs the lanes
    await until(lambda: sampled() >= later)
    return service, rank0


async def test_a_stopped_lane_is_stopped_before_it_is_gone(tmp_path: Path) -> None:
    """The story at 60x: `stopping` -> gone, never `stopped` (2 of 15 runs)."""
    events: list[ServiceEvent] = []
    service, rank0 = await stopped_and_removed(tmp_path, events)
    try:
        assert story(events)[-1] == "stopping", story(events)  # the follower has not seen it
        rank0.log.put_nowait(None)  # its stream ends: the container is gone
        await until(lambda: "gone" in story(events))
        assert story(events)[-3:] == ["stopping", "stopped", "gone"], story(events)
        assert LANE not in service.lanes()
    finally:
        await service.stop()


async def test_a_lane_whose_watcher_never_tells_is_dropped_after_a_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank's stream that never ends (its node cannot tell the container is
    gone) does not keep a lane no poll lists for the rest of the night."""
    monkeypatch.setattr(lane_feed, "UNLISTED_BOUND_S", 30.0)
    events: list[ServiceEvent] = []
    service, _ = await stopped_and_removed(tmp_path, events)
    try:
        await until(lambda: "gone" in story(events))
        assert story(events)[-2:] == ["stopping", "gone"], story(events)
    finally:
        await service.stop()
