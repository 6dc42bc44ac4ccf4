"""A weight load's progress, whatever counts it: the log's shard bar, a
loader's byte bar (core/phases.py reads both) or memory become resident on
the ranks' nodes (core/memload.py); its rate, its ETA, the slowest rank, and
how the console writes them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SHARDS, TENSORS, READ, RESIDENT = "shards", "tensors", "read", "resident"
"""What a :class:`LoadProgress` counts: the log's shards; tensors its loader's
bar counts (SGLang's InstantTensor); MiB its loader's byte bar says were read
(vLLM's InstantTensor); MiB of memory become resident on the rank's node
(core/memload.py: a load that prints none of these)."""


@dataclass(frozen=True)
class LoadProgress:
    """Weight loading of the slowest rank."""

    rank: int
    done: int
    total: int
    rate_per_s: float | None
    """Units (shards, tensors, MiB) per second, measured from the log timestamps (or
    the memory readings' times)."""
    eta_s: float | None
    measure: str = SHARDS
    """SHARDS, TENSORS, READ or RESIDENT: ``done`` and ``total`` are shards,
    tensors or MiB."""

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0

    def amount(self) -> str:
        """``12/40`` shards or tensors, ``188/376G`` GiB (tqdm's way: the Progress cell)."""
        if self.measure in (SHARDS, TENSORS):
            return f"{self.done}/{self.total}"
        return f"{self._gib()}G"

    def _gib(self) -> str:
        """``188/376``: done and total MiB, in whole GiB."""
        return f"{self.done / 1024:.0f}/{self.total / 1024:.0f}"

    def describe(self) -> str:
        if self.measure == SHARDS:
            text = f"shard {self.done}/{self.total} (rank {self.rank})"
            rate = f"{1 / self.rate_per_s:.0f} s/shard" if self.rate_per_s else ""
        elif self.measure == TENSORS:
            text = f"tensor {self.done}/{self.total} (rank {self.rank})"
            rate = f"{self.rate_per_s:.0f} tensors/s" if self.rate_per_s else ""
        else:
            text = f"{self._gib()} GiB {self.measure} (rank {self.rank})"
            rate = f"{self.rate_per_s * 60 / 1024:.1f} GiB/min" if self.rate_per_s else ""
        if rate:
            text += f", {rate}"
        if self.eta_s is not None:
            text += f", ETA {format_duration(self.eta_s)}"
        return text


def per_second(gained: float, since: float, now: float) -> float | None:
    """A load's rate: ``gained`` units from ``since`` to ``now``; None before
    it gained any or took any time."""
    return gained / (now - since) if gained > 0 and now > since else None


def eta_s(done: float, total: float, rate: float | None) -> float | None:
    """Seconds left at ``rate`` (None without one)."""
    return (total - done) / rate if rate else None


def slowest(progress: Iterable[LoadProgress]) -> LoadProgress | None:
    """The least fraction done, the first of equals (callers go by rank)."""
    return min(progress, key=lambda p: p.fraction, default=None)


def format_duration(seconds: float) -> str:
    """A duration as the console writes it: ``1h05m``, ``4m03s``, ``12s``."""
    s = max(0, round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"
