"""Lanes found in a snapshot: every sparktui lane with a container on some node,
from the containers' labels (the stop plan and the console's lane list)."""

from __future__ import annotations

from sparktui.core.state import ClusterSnapshot
from sparktui.watch.readiness import RankContainer, lane_ranks


def discover_lanes(snapshot: ClusterSnapshot) -> dict[str, tuple[RankContainer, ...]]:
    """Every lane with a container on a node that answered, ranks in order.

    A lane whose containers all exited still shows (its failure is the news);
    it disappears when its containers are removed. Two containers claiming one
    rank: the running one wins.
    """
    found: dict[str, dict[int, RankContainer]] = {}
    for snap in snapshot.nodes:
        if snap.probe is None:
            continue
        for lane in sorted({c.lane for c in snap.probe.containers if c.lane}):
            ranks = found.setdefault(lane, {})
            for rc in lane_ranks(snap.node, snap.probe.containers, lane):
                old = ranks.get(rc.rank)
                if old is None or (rc.running and not old.running):
                    ranks[rc.rank] = rc
    return {lane: tuple(r for _, r in sorted(ranks.items())) for lane, ranks in found.items()}
