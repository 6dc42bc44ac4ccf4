"""Lanes as the console shows them: discovered from container labels in the
node snapshots, enriched by the boot-phase tracker and the engine endpoint."""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.core.phases import LoadProgress
from sparktui.core.state import ClusterSnapshot
from sparktui.watch.readiness import RankContainer, lane_ranks


@dataclass(frozen=True)
class LaneView:
    name: str
    cluster: str
    engine: str
    port: int | None
    ranks: tuple[RankContainer, ...]
    phase: str = "starting"
    progress: float | None = None
    """Weight loading of the slowest rank, 0..1, while loading."""
    progress_text: str = ""
    """``shard 12/40 (rank 1), 28 s/shard, ETA 13m``."""
    load: LoadProgress | None = None
    """The same, as numbers (the console's Progress cell)."""
    kv_tokens: int | None = None
    concurrency: float | None = None
    health: str = "—"
    """``ok``, ``503``, ``refused``... from the last endpoint check."""
    decode_tps: float | None = None
    uptime_s: float | None = None
    protected: bool = False
    failure: str = ""
    """The first fatal line of any rank, with its rank."""

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(r.node for r in self.ranks)

    def node_of(self, rank: int) -> str | None:
        for r in self.ranks:
            if r.rank == rank:
                return r.node
        return None


def discover_lanes(snapshot: ClusterSnapshot) -> dict[str, tuple[RankContainer, ...]]:
    """Every sparktui lane with a container on some node, ranks in order.

    A lane whose containers all exited still shows (its failure is the news);
    it disappears when its containers are removed.
    """
    found: dict[str, dict[int, RankContainer]] = {}
    for snap in snapshot.nodes:
        if snap.probe is None:
            continue
        names = {c.lane for c in snap.probe.containers if c.lane}
        for lane in names:
            assert lane is not None
            for rc in lane_ranks(snap.node, snap.probe.containers, lane):
                found.setdefault(lane, {})[rc.rank] = rc
    return {lane: tuple(r for _, r in sorted(ranks.items())) for lane, ranks in found.items()}


def lane_cluster(snapshot: ClusterSnapshot, lane: str) -> str:
    for snap in snapshot.nodes:
        if snap.probe is None:
            continue
        for c in snap.probe.containers:
            if c.lane == lane and (cluster := c.labels.get("sparktui.cluster")):
                return cluster
    return ""


def lane_uptime(snapshot: ClusterSnapshot, lane: str) -> float | None:
    """The rank-0 container's ``Up ...`` time as docker reports it."""
    for snap in snapshot.nodes:
        if snap.probe is None:
            continue
        for c in snap.probe.containers:
            if c.lane == lane and c.labels.get("sparktui.rank") == "0":
                return c.up_for_s
    return None


def busy_lanes(snapshot: ClusterSnapshot) -> dict[str, str]:
    """node -> the lane (or foreign container) running on it."""
    out: dict[str, str] = {}
    for snap in snapshot.nodes:
        if snap.probe is None:
            continue
        for c in snap.probe.running_containers:
            out.setdefault(snap.node, c.lane or c.name)
    return out
