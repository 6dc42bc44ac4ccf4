"""The long-prompt envelope of a lane (pure arithmetic): the seeds' ladder
("Long prompts are tested in increasing order (8K -> 32K -> 64K -> 128K) and
never against a lane whose scratch envelope is unknown") and the rule it
derives, ``scratch ≈ a + b·N`` with a hard ceiling ("do not send N > X tokens
on a 99 GiB-weights lane, it hangs the host").

A rung's *scratch* is what a prefill of N tokens took from the host: per node,
MemAvailable just before the prompt minus the lowest MemAvailable sampled
while it ran; the lane's figure is the worst node's. The *ceiling* is the
longest prompt whose predicted scratch still leaves ``reserve_gib`` on the
tightest node. Before each rung its scratch is predicted from the rungs so far
(two or more: the least-squares line; one: a line through the origin's
intercept-free slope, conservative) and the rung is refused when the
prediction leaves less than the reserve.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_RUNGS = (8192, 32768, 65536, 131072)
"""8K, 32K, 64K, 128K (K = 1024 tokens)."""
_COUNT = re.compile(r"^\s*(\d+)\s*([kK]?)\s*$")
MAX_RUNG_TOKENS = 4_194_304


def parse_counts(text: str, flag: str, lo: int, hi: int) -> tuple[int, ...]:
    """A flag's comma list of whole numbers, K = 1024 (``8K,32K`` or ``0,4096,8192``:
    ``envelope --rungs``, ``bench --depths`` and ``--concurrency``), strictly
    increasing within [lo, hi]. Raises ValueError naming the flag and the item."""
    out: list[int] = []
    for item in text.split(","):
        m = _COUNT.match(item)
        if not m:
            raise ValueError(f"{flag}: not a whole number: {item.strip()!r} (write 8K or 8192)")
        n = int(m.group(1)) * (1024 if m.group(2) else 1)
        if not lo <= n <= hi:
            raise ValueError(f"{flag}: {item.strip()} is outside {lo}..{hi}")
        if out and n <= out[-1]:
            raise ValueError(f"{flag}: values must be strictly increasing ({item.strip()} "
                             f"after {out[-1]})")
        out.append(n)
    return tuple(out)


@dataclass(frozen=True)
class Rung:
    """One measured rung (the JSON keys are the issue's)."""

    tokens: int
    low_water_gib: float
    """Lowest MemAvailable seen on any rank's node during the prefill."""
    scratch_gib: float
    """Worst node's (MemAvailable before - low water)."""
    ok: bool
    samples: int = 0
    """Rounds of memory samples (every rank's node) taken during the prompt."""
    seconds: float = 0.0
    """How long the prompt took."""

    def to_json(self) -> dict[str, object]:
        return {"tokens": self.tokens, "low_water_gib": round(self.low_water_gib, 3),
                "scratch_gib": round(self.scratch_gib, 3), "ok": self.ok}

    def describe(self) -> str:
        if not self.ok:
            return (f"{self.tokens:,} tokens: not measured ({self.samples} memory samples in "
                    f"{self.seconds:.1f} s: the prefill was too short to be seen)")
        rate = (f", {self.samples} samples in {self.seconds:.1f} s "
                f"({self.samples / self.seconds:.1f} Hz)" if self.seconds > 0 else "")
        return (f"{self.tokens:,} tokens: scratch {self.scratch_gib:.2f} GiB, low water "
                f"{self.low_water_gib:.2f} GiB{rate}")


@dataclass(frozen=True)
class ScratchFit:
    a_gib: float
    b_gib_per_token: float
    residual_gib: float
    """Root-mean-square distance of the rungs from the line."""

    def predict(self, tokens: int) -> float:
        return self.a_gib + self.b_gib_per_token * tokens

    def ceiling(self, room_gib: float, reserve_gib: float) -> int:
        """The longest prompt whose predicted scratch leaves ``reserve_gib`` of
        ``room_gib`` (MemAvailable before the prompt on the tightest node)."""
        spare = room_gib - reserve_gib - self.a_gib
        if spare <= 0:
            return 0
        if self.b_gib_per_token <= 0:
            return MAX_RUNG_TOKENS
        return min(MAX_RUNG_TOKENS, int(spare / self.b_gib_per_token))

    def to_json(self) -> dict[str, float]:
        return {"a_gib": round(self.a_gib, 4), "b_gib_per_token": self.b_gib_per_token,
                "residual_gib": round(self.residual_gib, 4)}

    def describe(self) -> str:
        return (f"scratch ≈ {self.a_gib:.2f} GiB + {self.b_gib_per_token * 1024 * 1024:.1f} "
                f"KiB x N (residual {self.residual_gib:.2f} GiB)")


def fit_scratch(rungs: Sequence[Rung]) -> ScratchFit | None:
    """Least squares ``scratch = a + b·N`` over the rungs that completed; one rung:
    ``a = 0``, ``b = scratch / N`` (the steepest line through it, conservative for
    longer prompts); none: None."""
    pts = [(r.tokens, r.scratch_gib) for r in rungs if r.ok]
    if not pts:
        return None
    if len(pts) == 1:
        n, s = pts[0]
        return ScratchFit(0.0, max(0.0, s) / n, 0.0)
    k = len(pts)
    mx = sum(n for n, _ in pts) / k
    my = sum(s for _, s in pts) / k
    sxx = sum((n - mx) ** 2 for n, _ in pts)
    sxy = sum((n - mx) * (s - my) for n, s in pts)
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    rss = sum((s - (a + b * n)) ** 2 for n, s in pts)
    return ScratchFit(a, b, math.sqrt(rss / k))


@dataclass(frozen=True)
class RungCheck:
    """May the next rung be sent?"""

    tokens: int
    ok: bool
    predicted_scratch_gib: float | None
    left_gib: float | None
    message: str


def check_rung(tokens: int, rungs: Sequence[Rung], room_gib: float,
               reserve_gib: float) -> RungCheck:
    """Predict the rung's scratch from the rungs so far (none: nothing to predict,
    the first rung goes) and refuse it when the prediction leaves less than the
    reserve on the tightest node (``room_gib``: its MemAvailable now)."""
    fit = fit_scratch(rungs)
    if fit is None:
        return RungCheck(tokens, True, None, None,
                         f"{tokens:,} tokens: the first rung, nothing measured yet")
    predicted = fit.predict(tokens)
    left = room_gib - predicted
    if left < reserve_gib:
        return RungCheck(tokens, False, predicted, left,
                         f"{tokens:,} tokens refused: predicted scratch {predicted:.2f} GiB "
                         f"leaves {left:.2f} GiB of {room_gib:.2f} GiB available, under the "
                         f"{reserve_gib:g} GiB reserve (longest safe prompt: "
                         f"{fit.ceiling(room_gib, reserve_gib):,} tokens)")
    return RungCheck(tokens, True, predicted, left,
                     f"{tokens:,} tokens: predicted scratch {predicted:.2f} GiB leaves "
                     f"{left:.2f} GiB (reserve {reserve_gib:g} GiB)")


def rung_scratch(before_kib: dict[str, int], low_kib: dict[str, int]) -> tuple[float, float]:
    """(low water GiB, scratch GiB) of one rung from each node's MemAvailable
    before the prompt and its lowest sample during it (nodes without a sample
    count as not measured)."""
    nodes = [n for n in before_kib if n in low_kib]
    if not nodes:
        raise ValueError("no node was sampled during the prefill")
    low = min(low_kib[n] for n in nodes) / 1024 / 1024
    scratch = max(before_kib[n] - low_kib[n] for n in nodes) / 1024 / 1024
    return low, max(0.0, scratch)
