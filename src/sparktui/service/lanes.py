"""Lanes as the console shows them: discovered from container labels in the
node snapshots, enriched by the boot-phase tracker and the engine endpoint."""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.core.loadprogress import LoadProgress
from sparktui.core.logsig import Phase
from sparktui.core.state import ClusterSnapshot
from sparktui.watch.readiness import RankContainer

UNRESPONSIVE, STOPPING, STOPPED = "unresponsive", "stopping", "stopped"
"""A lane's phase besides its boot phase: serving but its canary gets no answer;
being stopped; stopped (service/lane_feed.LaneFeed.view)."""
LANE_STATES: tuple[str, ...] = (*(p.value for p in Phase), UNRESPONSIVE, STOPPING, STOPPED)
"""Every phase a lane view can show."""


@dataclass(frozen=True)
class LaneView:
    name: str
    cluster: str
    engine: str
    port: int | None
    ranks: tuple[RankContainer, ...]
    phase: str = Phase.STARTING.value
    """One of LANE_STATES."""
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
    """The first fatal line of any rank, with its rank (and its cause)."""
    failure_brief: str = ""
    """Why it failed in few words (core/failure.Failure.brief): the Progress cell."""
    gate: str = ""
    """Quality gate: qualifying, qualified, garbled, slow, failed ("" before any)."""
    gate_text: str = ""
    """The gate's one-line verdict."""
    canary: tuple[str, ...] = ()
    """Evidence of the serving canary's last verdict (watch/canary.py)."""
    stale_s: float | None = None
    """Age of the last good endpoint answer when older than two checks."""
    canary_s: float | None = None
    """Time to the first token of the canary's last completion (None until one answered)."""

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(r.node for r in self.ranks)

    def node_of(self, rank: int) -> str | None:
        for r in self.ranks:
            if r.rank == rank:
                return r.node
        return None


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
