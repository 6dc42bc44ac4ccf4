"""Predictive OOM during a load, pure: will a rank run out of memory before its
boot ends, and when?

Boot D thrashed four nodes mid-load; the operator saw it only when SSH starved.
Yet from the first minutes of the load everything needed to see it coming is
known, per rank: the shards loaded of the total, how much memory each shard
took (MemAvailable falling as shards arrive), the KV cache and runtime that
the engine allocates once the weights are in (the recipe's fit), and
MemAvailable now with its trend. A rank is predicted to run out when what it
still needs exceeds what is available:

    need = growth per shard x shards left + allocation after the load
    warn when need > MemAvailable + SLACK_GIB, on two readings in a row

Quiet by construction (a false alarm at 3 a.m. teaches the operator to ignore
the next one): the growth per shard is the *smaller* of what was observed (a
least-squares slope of MemAvailable over shards) and what the recipe's fit
says; at least MIN_SHARDS_SEEN shards of progress are needed; one shard is
taken to be in flight (its memory in before its log line); only ranks still
loading are judged (once KV allocation begins its memory is no longer "to
come"); and a warning needs CONFIRMATIONS readings in a row.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .fit import FitReport

SLACK_GIB = 1.0
"""Need beyond MemAvailable tolerated before warning (kernel slack, rounding)."""
HARD_GIB = 4.0
"""Short by this much or more: certain enough to stop the lane automatically
(when the recipe asks for it: readiness.stop_on_predicted_oom)."""
MIN_SHARDS_SEEN = 3
"""Shards of progress observed before a rank's growth counts."""
CONFIRMATIONS = 2
"""Readings in a row that must agree before a warning is raised."""
READINGS = 512
"""Readings kept per rank (a 2-hour load read every 10 s)."""


@dataclass(frozen=True)
class LoadPlan:
    """What the recipe's fit says about one rank's memory during and after the load."""

    weights_gib: float
    """Weights resident per rank when the load ends."""
    after_load_gib: float
    """Allocated once the weights are in: KV cache (pinned or what the GMU budget
    leaves), runtime reserve, drafter and pinned extras."""
    min_ranks: int | None = None
    """The fewest ranks the weights fit on (the next step's "serve on >= N ranks")."""


def load_plan(report: FitReport) -> LoadPlan:
    """The load plan of a fit report (the KV part only when the budget leaves any:
    a negative budget makes the engine refuse at KV allocation, not thrash)."""
    after = report.resident_gib - report.weights_per_rank_gib + max(0.0,
                                                                    report.kv_available_gib)
    return LoadPlan(report.weights_per_rank_gib, after, report.min_ranks_to_fit)


@dataclass(frozen=True)
class OomPredicted:
    """A rank predicted to run out of memory during (or right after) its load."""

    lane: str
    rank: int
    node: str
    at: float
    """Monotonic time of the prediction."""
    shards_done: int
    shards_total: int
    out_at_shard: int | None
    """The shard whose memory no longer fits; None: the weights fit, the KV/runtime
    allocation after the load does not."""
    eta_s: float | None
    need_gib: float
    """Memory still to come on this rank (rest of the weights + after the load)."""
    available_gib: float
    trend_gib_per_min: float | None
    """MemAvailable's recent change (negative while loading)."""
    hard: bool
    """Short by HARD_GIB or more."""
    next_step: str

    @property
    def short_gib(self) -> float:
        return self.need_gib - self.available_gib

    def message(self) -> str:
        """"dgx7 runs out at shard 118/141 in ~6 min (needs ~9.3 GiB more, 4.1 GiB
        available) -> ..."."""
        where = (f"at shard {self.out_at_shard}/{self.shards_total}"
                 if self.out_at_shard is not None else "at KV allocation after the load")
        when = f" in ~{max(1, round(self.eta_s / 60))} min" if self.eta_s is not None else ""
        return (f"{self.node} runs out {where}{when} (needs ~{self.need_gib:.1f} GiB more, "
                f"{self.available_gib:.1f} GiB available; rank {self.rank}, shard "
                f"{self.shards_done}/{self.shards_total}) -> {self.next_step}")

    def to_json(self) -> dict[str, Any]:
        return {"lane": self.lane, "rank": self.rank, "node": self.node,
                "shards_done": self.shards_done, "shards_total": self.shards_total,
                "out_at_shard": self.out_at_shard,
                "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
                "need_gib": round(self.need_gib, 2), "available_gib": round(self.available_gib, 2),
                "trend_gib_per_min": None if self.trend_gib_per_min is None
                else round(self.trend_gib_per_min, 2),
                "hard": self.hard, "message": self.message()}


@dataclass
class _Rank:
    node: str
    readings: deque[tuple[float, int, float]] = field(
        default_factory=lambda: deque(maxlen=READINGS))
    """(t, shards done, MemAvailable GiB) since the load began, oldest first."""
    agreeing: int = 0
    warned: OomPredicted | None = None


@dataclass
class OomPredictor:
    """Per rank of one lane: feed readings, get a warning when one is due."""

    lane: str
    plan: LoadPlan
    _ranks: dict[int, _Rank] = field(default_factory=dict)

    def observe(self, rank: int, node: str, t: float, done: int, total: int,
                available_gib: float) -> OomPredicted | None:
        """One reading of ``rank``: shards ``done``/``total`` and its node's
        MemAvailable at monotonic time ``t``. Returns a warning when this reading
        raises one (the first for this rank, or the first certain one), else None;
        ``warnings()`` holds each rank's latest."""
        st = self._ranks.setdefault(rank, _Rank(node))
        if total <= 0 or done < 1 or done >= total:
            st.agreeing = 0
            return None
        if st.readings and done + MIN_SHARDS_SEEN < st.readings[-1][1]:
            st.readings.clear()  # a new load (a restart), not a late log line
        st.readings.append((t, done, available_gib))
        pred = self._predict(rank, st, total)
        if pred is None:
            st.agreeing = 0
            return None
        st.agreeing += 1
        if st.agreeing < CONFIRMATIONS:
            return None
        news = st.warned is None or (pred.hard and not st.warned.hard)
        st.warned = pred
        return pred if news else None

    def warnings(self) -> dict[int, OomPredicted]:
        """The current warning of each rank that has one."""
        return {r: st.warned for r, st in self._ranks.items() if st.warned is not None}

    def _predict(self, rank: int, st: _Rank, total: int) -> OomPredicted | None:
        t0, done0, _ = st.readings[0]
        t, done, avail = st.readings[-1]
        progressed = done - done0
        if progressed < MIN_SHARDS_SEEN:
            return None
        observed = _growth(st.readings)
        planned = self.plan.weights_gib / total
        growth = min(observed, planned) if observed > 0 else planned
        left = total - done
        # a shard's memory can be in before its log line: count one shard as in flight
        need = growth * max(0, left - 1) + self.plan.after_load_gib
        if need <= avail + SLACK_GIB:
            return None
        rate = progressed / (t - t0) if t > t0 else None
        if growth > 0 and avail < growth * left:
            out_at = done + math.floor(avail / growth) + 1
            eta = (out_at - done) / rate if rate else None
        else:
            out_at = None
            eta = left / rate if rate else None
        trend = None
        if len(st.readings) > 1 and t > (prev := st.readings[-2])[0]:
            trend = (avail - prev[2]) / (t - prev[0]) * 60.0
        hard = need - avail >= HARD_GIB
        then = (f"serve on >= {self.plan.min_ranks} ranks or load lazily"
                if self.plan.min_ranks and self.plan.min_ranks > 1 else "load lazily or "
                "lower the KV pin")
        next_step = (f"stop the lane now (`sparktui stop {self.lane}`) before the node "
                     f"thrashes, then {then}")
        return OomPredicted(self.lane, rank, st.node, t, done, total, out_at, eta, need, avail,
                            trend, hard, next_step)


def _growth(readings: deque[tuple[float, int, float]]) -> float:
    """GiB per shard, >= 0: shards done regressed on MemAvailable, inverted. The
    noise is in the shard count (a log line late by a shard), so it is the
    dependent variable: regressing the other way would shrink the slope early in
    the load, when few shards are in."""
    _, done, avail = zip(*readings, strict=True)  # up to READINGS, every reading
    mean_d = sum(done) / len(done)
    mean_a = sum(avail) / len(avail)
    da = [a - mean_a for a in avail]
    var = sum(map(operator.mul, da, da))
    cov = sum(map(operator.mul, [d - mean_d for d in done], da))
    if var <= 0 or cov >= 0:
        return 0.0
    return -var / cov
