"""A load's progress where the log prints none: the weights becoming resident
on each rank's node.

InstantTensor prints one byte bar on rank 0 only (vLLM 0.33
model_loader/weight_utils.py:1457, disabled without ``use_tqdm_on_load``), and
worker ranks print nothing; the console then showed ``serve: readiness`` for the
whole of a 40-minute load, and the lane would have been declared stalled. What
every rank's node does show is MemAvailable falling as its slice of the weights
arrives. One reading per node serves both uses:

- against a stall: each ``step_kib`` more resident since the last note is a
  progress note (:meth:`MemoryLoad.observe` returns it);
- against a total (the recipe's weights per rank, :meth:`MemoryLoad.progress`)::

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

from sparktui.core.loadprogress import RESIDENT, LoadProgress, eta_s, per_second, slowest
from sparktui.core.state import KIB_PER_GIB

KIB_PER_MIB = 1024
MEM_PROGRESS_KIB = 256 * 1024
"""Weights becoming resident: this much less MemAvailable on a rank's node
counts as load progress (worker ranks and InstantTensor print no shards)."""


@dataclass
class _Node:
    base_kib: int
    """MemAvailable at the first reading (or after memory was freed)."""
    mark_kib: int
    """MemAvailable at the last progress note (or after memory was freed since)."""
    grew_at: float | None = None
    grew_kib: int = 0
    """When resident memory first grew by a step, and by how much then."""
    now_at: float = 0.0
    resident_kib: int = 0


class MemoryLoad:
    """Per-rank weights becoming resident, from MemAvailable readings."""

    def __init__(self, step_kib: int = MEM_PROGRESS_KIB) -> None:
        """``step_kib``: growth that is a progress note, and starts the rate."""
        self.step_kib = step_kib
        self._nodes: dict[str, _Node] = {}

    def observe(self, node: str, available_kib: int, now: float) -> str | None:
        """One reading of ``node`` at ``now``; a progress note when it holds
        another step more than at the last note (memory freed, a restart or
        another lane stopping, resets the mark)."""
        st = self._nodes.get(node)
        if st is None or available_kib > st.base_kib:
            self._nodes[node] = _Node(available_kib, available_kib, now_at=now)
            return None
        st.now_at, st.resident_kib = now, st.base_kib - available_kib
        if st.grew_at is None and st.resident_kib >= self.step_kib:
            st.grew_at, st.grew_kib = now, st.resident_kib
        before = st.mark_kib
        if available_kib > before:
            st.mark_kib = available_kib
            return None
        if before - available_kib < self.step_kib:
            return None
        st.mark_kib = available_kib
        return (f"{node}: {(before - available_kib) / KIB_PER_GIB:.1f} GiB more resident "
                f"(MemAvailable {available_kib / KIB_PER_GIB:.1f} GiB)")

    def progress(self, ranks: Iterable[tuple[str, int]], weights_gib: float
                 ) -> LoadProgress | None:
        """The slowest of the nodes of ``ranks`` ((node, rank) each) that were
        read, once one of them grew by a step, against ``weights_gib``: what
        one rank holds once loaded (the recipe's fit, ``weights_per_rank_gib``).
        None before, or without a total. A node holding two ranks fills twice:
        each is counted half of it."""
        total_kib = int(weights_gib * KIB_PER_GIB)
        on: dict[str, list[int]] = {}
        for node, rank in ranks:
            on.setdefault(node, []).append(rank)
        read = [(min(rs), len(rs), st) for node, rs in on.items()
                if (st := self._nodes.get(node)) is not None]
        if total_kib <= 0 or all(st.grew_at is None for _, _, st in read):
            return None
        return slowest(_progress(rank, n, st, total_kib)
                       for rank, n, st in sorted(read, key=lambda r: r[0]))


def _progress(rank: int, n: int, st: _Node, total_kib: int) -> LoadProgress:
    """One node's count, of its ``n`` ranks the lowest ``rank``'s."""
    grew_at = st.grew_at
    done = min(st.resident_kib // n if grew_at is not None else 0, total_kib)
    rate = None if grew_at is None \
        else per_second((st.resident_kib - st.grew_kib) / n, grew_at, st.now_at)
    eta = 0.0 if done >= total_kib else eta_s(done, total_kib, rate)
    return LoadProgress(rank, done // KIB_PER_MIB, total_kib // KIB_PER_MIB,
                        rate / KIB_PER_MIB if rate else None, eta, RESIDENT)
