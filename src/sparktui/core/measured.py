"""What a boot measured of a recipe on a cluster (pure): the engine's own memory
accounting as the phase tracker read it from rank 0's log (weights per rank,
KV pool GiB and tokens, graph memory) -> KV bytes per token, kept with the
boot (its workflow id and time) in the serve's journal entry, so that `fit`
can use measured figures first and show the calculator's error beside them.

Where a derived or typed figure contradicts a boot that ran (the seeds' r39
lane at 131072 with a 6 GiB pin, refused "short by 0.59 GiB" by the night's
52.7 KB/token), the measured KV bytes per token is what the fit believes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

GIB = 1024**3


@dataclass(frozen=True)
class BootFigures:
    boot: str
    """The serve workflow's id (the journal's ``wf``)."""
    at: float
    """Epoch seconds the boot ended."""
    cluster: str
    weights_per_rank_gib: float | None
    kv_pool_gib: float | None
    kv_pool_tokens: int | None
    graphs_gib: float | None
    max_model_len: int | None

    @property
    def kv_bytes_per_token(self) -> int | None:
        if not self.kv_pool_gib or not self.kv_pool_tokens:
            return None
        return int(self.kv_pool_gib * GIB / self.kv_pool_tokens)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["kv_bytes_per_token"] = self.kv_bytes_per_token
        return out


def boot_figures(memory_gib: Mapping[str, float], kv_tokens: int | None,
                 kv_max_len: int | None) -> dict[str, Any]:
    """The serve's journal detail ``measured``: what the tracker read (None: not printed)."""
    return {"weights_per_rank_gib": memory_gib.get("weights"),
            "kv_pool_gib": memory_gib.get("kv"), "kv_pool_tokens": kv_tokens,
            "graphs_gib": memory_gib.get("graphs"), "max_model_len": kv_max_len}


def last_boot(ends: Iterable[tuple[str, float, Mapping[str, Any]]], recipe: str,
              cluster: str) -> BootFigures | None:
    """The newest successful serve of ``recipe`` on ``cluster`` that measured
    something, from (wf, t, detail) of the journal's serve ``end`` entries."""
    best: BootFigures | None = None
    for wf, t, detail in ends:
        m = detail.get("measured")
        if (detail.get("recipe") != recipe or detail.get("cluster") != cluster
                or detail.get("outcome") != "ready" or not isinstance(m, Mapping)):
            continue
        if best is not None and t < best.at:
            continue
        best = BootFigures(wf, t, cluster, _f(m.get("weights_per_rank_gib")),
                           _f(m.get("kv_pool_gib")), _i(m.get("kv_pool_tokens")),
                           _f(m.get("graphs_gib")), _i(m.get("max_model_len")))
    return best


def _f(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _i(v: object) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None
