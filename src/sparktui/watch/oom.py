"""Predictive OOM for one booting lane: feeds core/oom_predict from what the
readiness watch already gathers — per-rank shards from its PhaseTracker and
MemAvailable from its memory reads (``watch/lane.MemoryRead`` events) — and reports
each new warning (``OomPredicted``) to ``on_warning``. No I/O of its own.

    oom = OomWatch(lane, ranks, watch.tracker, load_plan(fit(...)), clock, on_warning)
    watch.subscribe(...)  # MemoryRead(node, available_kib) -> oom.on_memory
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sparktui.core.clock import Clock
from sparktui.core.config import Config
from sparktui.core.fit import fit
from sparktui.core.loadprogress import SHARDS
from sparktui.core.logsig import Phase
from sparktui.core.oom_predict import LoadPlan, OomPredicted, OomPredictor, load_plan
from sparktui.core.phases import PhaseTracker
from sparktui.core.recipe import Recipe
from sparktui.core.state import KIB_PER_GIB
from sparktui.watch.readiness import RankContainer


class OomWatch:
    def __init__(self, lane: str,
                 ranks: Sequence[RankContainer] | Callable[[], Sequence[RankContainer]],
                 tracker: PhaseTracker, plan: LoadPlan, clock: Clock,
                 on_warning: Callable[[OomPredicted], None]) -> None:
        """``ranks``: the lane's ranks, or how to read them now (a lane the console
        discovers rank by rank)."""
        self.lane = lane
        self._ranks = ranks
        self.tracker = tracker
        self.clock = clock
        self.on_warning = on_warning
        self.predictor = OomPredictor(lane, plan)

    def on_memory(self, node: str, available_kib: int) -> None:
        """One MemAvailable reading of ``node``: judge every rank on it that is
        still loading. A rank that prints no shards is judged on its own node's
        memory at the shard count of the slowest rank that prints them. In vLLM
        that is every rank but the global first: its shard bar is gated on
        ``torch.distributed.get_rank() == 0`` (0.33
        ``model_loader/weight_utils.py:845``, 0.11 ``:510``) and a worker prints
        nothing while it loads, so rank 0's count is the lane's. It is a fair
        pace, not an exact one: every TP rank reads every checkpoint file, its
        slice of each tensor (0.33 in one sorted order, ``:1134``), with no
        barrier between files. A worker on a slower node is credited shards it
        has not read (fewer seem left: a later warning, never a false one); one
        on a faster node is shorted the shards it leads by, and its need is
        overstated by their growth (the slope, read against the same count, is
        not)."""
        if self.tracker.phase is not Phase.LOADING:
            return
        shards = self.tracker.rank_shards()
        slowest = self.tracker.load_progress()
        if slowest is not None and slowest.measure != SHARDS:
            slowest = None  # the predictor counts shards, not MiB of a byte bar
        now = self.clock.monotonic()
        ranks = self._ranks() if callable(self._ranks) else self._ranks
        for rc in ranks:
            if rc.node != node:
                continue
            done_total = shards.get(rc.rank) or (
                (slowest.done, slowest.total) if slowest is not None else None)
            if done_total is None:
                continue
            warning = self.predictor.observe(rc.rank, node, now, *done_total,
                                             available_kib / KIB_PER_GIB)
            if warning is not None:
                self.on_warning(warning)

    def warnings(self) -> dict[int, OomPredicted]:
        return self.predictor.warnings()


def lane_load_plan(config: Config, recipe: Recipe | None, nodes: Sequence[str]
                   ) -> LoadPlan | None:
    """The load plan of a running lane's recipe (the lane name is the recipe name)
    on the cluster whose nodes it runs on; None without a recipe."""
    if recipe is None:
        return None
    cluster = next((name for name, c in config.clusters.items()
                    if list(c.nodes) == list(nodes)), recipe.cluster)
    return load_plan(fit(config, recipe, cluster))
