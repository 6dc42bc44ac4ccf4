"""A lane's bench table (pure): the seeds' "d0 c1: 892 pp / 33.2 tg / 2,193 ms;
d4096, d8192 at c1 and c2" as cells of depth x concurrency, each the mean of
its concurrent requests (core/qualify.py's `Bench` per request), the report's
Markdown, and the comparison with the previous report of the same recipe: a
drop beyond the run-to-run spread is flagged.

The spread of a cell's figure is the relative range of its requests' values
(zero at concurrency 1); the tolerance of a comparison is the larger of both runs'
spreads and :data:`MIN_SPREAD` (a single request per cell has no spread of its
own: the seeds' runs agree within a few percent, e.g. 161 vs 166).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .qualify import Bench, BenchClock

MIN_SPREAD = 0.08
"""Run-to-run spread assumed when a run cannot show its own (8 %)."""
FIGURES = (("prefill_tps", "prefill", True), ("decode_tps", "decode", True),
           ("ttft_ms", "TTFT", False))
"""(key, word, higher is better)."""


@dataclass(frozen=True)
class Cell:
    depth: int
    concurrency: int
    prefill_tps: float
    decode_tps: float | None
    ttft_ms: float
    spread: Mapping[str, float]
    """Per figure (:data:`FIGURES` keys), the relative range over the cell's requests."""
    clock: BenchClock = BenchClock.ENGINE
    """The engine's when each request was timed by its /metrics timers (at
    concurrency 1), else the client's (concurrent requests overlap in them)."""

    def to_json(self) -> dict[str, Any]:
        """The issue's keys (``spread`` is kept in the report file, not the CLI's JSON)."""
        return {"depth": self.depth, "concurrency": self.concurrency,
                "prefill_tps": round(self.prefill_tps, 1),
                "decode_tps": None if self.decode_tps is None else round(self.decode_tps, 2),
                "ttft_ms": round(self.ttft_ms, 1)}

    def describe(self) -> str:
        tg = f"{self.decode_tps:.1f}" if self.decode_tps is not None else "?"
        on = " (on the client's clock)" if self.clock is BenchClock.CLIENT else ""
        return (f"d{self.depth} c{self.concurrency}: {self.prefill_tps:,.0f} pp / {tg} tg / "
                f"{self.ttft_ms:,.0f} ms{on}")


def _spread(values: Sequence[float]) -> float:
    mean = sum(values) / len(values) if values else 0.0
    return (max(values) - min(values)) / mean if mean > 0 and len(values) > 1 else 0.0


def cell_of(depth: int, concurrency: int, benches: Sequence[Bench]) -> Cell:
    """The mean of the cell's requests (each `Bench`), with their spread."""
    if not benches:
        raise ValueError("a cell needs at least one request")
    pp = [b.prefill_tps for b in benches]
    ttft = [b.ttft_ms for b in benches]
    tg = [b.decode_tps for b in benches if b.decode_tps is not None]
    clock = BenchClock.ENGINE if all(b.clock is BenchClock.ENGINE for b in benches) \
        else BenchClock.CLIENT
    return Cell(depth, concurrency, sum(pp) / len(pp), sum(tg) / len(tg) if tg else None,
                sum(ttft) / len(ttft), {"prefill_tps": _spread(pp), "decode_tps": _spread(tg),
                                        "ttft_ms": _spread(ttft)}, clock)


def regressions(now: Sequence[Cell], previous: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each figure of ``now`` worse than the same cell of ``previous`` (a report's
    ``runs``) by more than the run-to-run spread, in words. A cell timed on
    another clock than the previous one is not compared (a report without
    ``clock`` was timed on the client's)."""
    before = {(int(p["depth"]), int(p["concurrency"])): p for p in previous}
    out = []
    for c in now:
        p = before.get((c.depth, c.concurrency))
        if p is None or p.get("clock", BenchClock.CLIENT.value) != c.clock.value:
            continue
        kept = p.get("spread")
        old_spread: Mapping[str, Any] = kept if isinstance(kept, Mapping) else {}
        for key, word, higher in FIGURES:
            tolerance = max(MIN_SPREAD, c.spread.get(key, 0.0),
                            float(old_spread.get(key) or 0.0))
            value, old = getattr(c, key), p.get(key)
            if value is None or not old:
                continue
            change = value / float(old) - 1
            worse = -change if higher else change
            if worse > tolerance:
                out.append(f"d{c.depth} c{c.concurrency} {word} {value:,.1f} vs {float(old):,.1f}"
                           f" ({change * 100:+.0f}%, beyond the {tolerance * 100:.0f}% spread)")
    return out


def markdown(lane: str, when: str, cells: Sequence[Cell], flagged: Sequence[str],
             previous: str) -> str:
    """The report's .md (the seeds' table)."""
    lines = [f"# bench {lane} ({when} UTC)", "",
             "| depth | conc | prefill tok/s | decode tok/s | TTFT ms |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for c in cells:
        tg = f"{c.decode_tps:.1f}" if c.decode_tps is not None else "?"
        lines.append(f"| {c.depth} | {c.concurrency} | {c.prefill_tps:,.0f} | {tg} | "
                     f"{c.ttft_ms:,.0f} |")
    client = [f"d{c.depth} c{c.concurrency}" for c in cells if c.clock is BenchClock.CLIENT]
    lines += ["", "Timed on the engine's clock (its /metrics timers)" + (
        f", except {', '.join(client)}: the client's (concurrent requests overlap in the "
        "engine's timers); a cell is compared only with one timed on the same clock."
        if client else ".")]
    lines.append("")
    if previous:
        lines.append(f"Compared with {previous}: " + ("no drop beyond the spread." if not flagged
                                                      else "**regressions:**"))
        lines += [f"- {f}" for f in flagged]
    else:
        lines.append("No previous report to compare with.")
    return "\n".join(lines) + "\n"
