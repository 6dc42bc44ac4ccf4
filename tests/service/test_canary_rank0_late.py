"""A lane found before its rank 0's node was polled (the nodes' first slow
probes land in any order) is watched again once rank 0 shows: the first
watch had no API host, so no endpoint check and no canary verdict would ever
have come (the throughput-collapse canary test's old flake)."""

from __future__ import annotations

from pathlib import Path

from ..tui.fakecluster import add_lane
from .test_cluster_service import make, until

LANE = "glm53-flash-eugr-2x"


async def test_lane_found_without_rank0_is_rewatched_with_its_api_host(tmp_path: Path) -> None:
    _, fleet, _, service = make(tmp_path)
    rank0, _ = add_lane(fleet, LANE, "4nodes-switch-b", ["dgx5", "dgx6"])
    fleet.nodes["dgx5"].containers.remove(rank0)  # dgx5's containers not read yet
    await service.start(lambda e: None)
    try:
        await until(lambda: LANE in service.lanes())
        first = service._watchers.get(LANE)
        assert first is not None and first.port is None
        fleet.nodes["dgx5"].containers.append(rank0)
        assert service.poller is not None
        service.poller.refresh("dgx5")  # its containers are read on its next tick
        await until(lambda: service._watchers.get(LANE) is not first)
        watch = service._watchers.get(LANE)
        assert watch is not None and watch.port == 8000
        assert watch.api_host == service._endpoints.node("dgx5").api_host  # type: ignore[union-attr]
        assert "endpoint" in watch._tasks
        await until(lambda: service.lanes()[LANE].ranks[0].rank == 0)
    finally:
        await service.stop()
