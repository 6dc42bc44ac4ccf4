"""A load's progress where the log prints none: the weights becoming resident
on each rank's node, against what the recipe says a rank holds.

InstantTensor prints one byte bar on rank 0 only (vLLM 0.33
model_loader/weight_utils.py:1457, disabled without ``use_tqdm_on_load``), and
worker ranks print nothing; the console then showed ``serve: readiness`` for the
whole of a 40-minute load. What every rank's node does show is MemAvailable
falling as its slice of the weights arrives (core/phases.MemoryProgress counts
that as progress against a stall; this counts it against a total):

    resident = (MemAvailable at the first reading - MemAvailable now) / ranks on the node
    fraction = resident / weights per rank (the recipe's fit), at most 1
    rate     = resident's growth since it began to grow / the time it took

The slowest node read is the lane's progress, with the rank on it (a node
that has not begun to fill is at 0). A console that
starts watching mid-load counts from its first reading: its fraction is low
by what was already resident, its rate is right. Memory freed on a node (a
restart, another lane stopping) starts that node's count again. Pure: the
caller passes the readings and their times."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sparktui.core.phases import MEM_PROGRESS_KIB, RESIDENT, LoadProgress

KIB_PER_MIB = 1024


@dataclass
class _Node:
    base_kib: int
    """MemAvailable at the first reading (or after memory was freed)."""
    grew_at: float | None = None
    grew_kib: int = 0
    """When resident memory first grew by a step, and by how much then."""
    now_at: float = 0.0
    resident_kib: int = 0


class MemoryLoad:
    """Per-rank weights becoming resident, from MemAvailable readings."""

    def __init__(self, weights_gib: float, step_kib: int = MEM_PROGRESS_KIB) -> None:
        """``weights_gib``: what one rank holds once loaded (the recipe's fit,
        ``weights_per_rank_gib``); ``step_kib``: growth that starts the rate."""
        self.total_kib = int(weights_gib * 1024 * 1024)
        self.step_kib = step_kib
        self._nodes: dict[str, _Node] = {}

    def observe(self, node: str, available_kib: int, now: float) -> None:
        st = self._nodes.get(node)
        if st is None or available_kib > st.base_kib:
            self._nodes[node] = _Node(available_kib, now_at=now)
            return
        st.now_at, st.resident_kib = now, st.base_kib - available_kib
        if st.grew_at is None and st.resident_kib >= self.step_kib:
            st.grew_at, st.grew_kib = now, st.resident_kib

    def progress(self, ranks: Iterable[tuple[str, int]]) -> LoadProgress | None:
        """The slowest of the nodes of ``ranks`` ((node, rank) each) that were
        read, once one of them grew by a step; None before, or without a total.
        A node holding two ranks fills twice: each is counted half of it."""
        on: dict[str, list[int]] = {}
        for node, rank in ranks:
            on.setdefault(node, []).append(rank)
        read = [(min(rs), len(rs), st) for node, rs in on.items()
                if (st := self._nodes.get(node)) is not None]
        if self.total_kib <= 0 or all(st.grew_at is None for _, _, st in read):
            return None
        worst: LoadProgress | None = None
        for rank, n, st in sorted(read, key=lambda r: r[0]):
            resident = st.resident_kib // n if st.grew_at is not None else 0
            done = min(resident, self.total_kib)
            rate = None
            if st.grew_at is not None and st.now_at > st.grew_at \
                    and st.resident_kib > st.grew_kib:
                rate = (st.resident_kib - st.grew_kib) / n / (st.now_at - st.grew_at)
            eta = 0.0 if done >= self.total_kib else (self.total_kib - done) / rate \
                if rate else None
            p = LoadProgress(rank, done // KIB_PER_MIB, self.total_kib // KIB_PER_MIB,
                             rate / KIB_PER_MIB if rate else None, eta, RESIDENT)
            if worst is None or p.fraction < worst.fraction:
                worst = p
        return worst
