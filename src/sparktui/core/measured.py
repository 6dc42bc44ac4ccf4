"""What a boot measured of a recipe on a cluster (pure): the engine's own memory
accounting as the phase tracker read it from rank 0's log (weights per rank,
KV pool GiB and tokens, graph memory; both engines' lines: `memory_figure`)
-> KV bytes per token, kept with the
boot (its workflow id and time) in the serve's journal entry, so that `fit`
can use measured figures first and show the calculator's error beside them.

Where a derived or typed figure contradicts a boot that ran (the seeds' r39
lane at 131072 with a 6 GiB pin, refused "short by 0.59 GiB" by the night's
52.7 KB/token), the measured KV bytes per token is what the fit believes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .logsig import Kind, parse_float

GIB = 1024**3

_VLLM_FIGURES = {Kind.LOAD_DONE: "weights", Kind.KV_MEMORY: "kv", Kind.GRAPH_DONE: "graphs"}
"""vLLM's lines print GiB (``gib``): "Model loading took", "Available KV cache
memory" or the pin's "reserved ... memory for KV Cache", "Graph capturing finished"."""


def memory_figure(kind: Kind, fields: Mapping[str, str]) -> tuple[str, float] | None:
    """The memory figure a boot line prints, as (``weights`` | ``kv`` | ``graphs``,
    GiB), or None. vLLM prints GiB (``gib``). SGLang 0.5.23 prints "GB" that are
    GiB: ``get_available_gpu_memory`` divides by ``1 << 30``
    (sglang/srt/utils/common.py:576) and the KV pool's sizes by ``GB = 1024 * 1024
    * 1024`` (sglang/srt/mem_cache/memory_pool.py:116). Its weights are "Load weight
    end. ... mem usage=X GB." (free memory before the load minus after,
    model_runner.py:1365, printed at :1372); its KV pool is "KV Cache is allocated.
    ... #tokens: N, K size: X GB, V size: Y GB" (K + V, memory_pool.py:2087) or
    "... KV size: X GB" (one buffer, :2095). It prints no graph memory."""
    what = _VLLM_FIGURES.get(kind)
    if what is not None and (gib := parse_float(fields.get("gib"))) is not None:
        return what, gib
    if kind is Kind.LOAD_DONE and (gb := parse_float(fields.get("gb"))) is not None:
        return "weights", gb
    if kind is Kind.KV_CACHE:
        k, v = parse_float(fields.get("k_gb")), parse_float(fields.get("v_gb"))
        if k is not None and v is not None:
            return "kv", round(k + v, 2)
        if (kv := parse_float(fields.get("kv_gb"))) is not None:
            return "kv", kv
    return None


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
    mem_available_gib: Mapping[str, float] = field(default_factory=dict)
    """Lowest MemAvailable of the nodes before_load, after_load, after_kv, headroom."""

    @property
    def kv_bytes_per_token(self) -> int | None:
        if not self.kv_pool_gib or not self.kv_pool_tokens:
            return None
        return int(self.kv_pool_gib * GIB / self.kv_pool_tokens)

    def describe(self) -> str:
        """What was printed, in one line (parts not printed are left out)."""
        parts = []
        if self.weights_per_rank_gib:
            parts.append(f"weights {self.weights_per_rank_gib:.2f} GiB/rank")
        if self.kv_pool_gib and self.kv_pool_tokens:
            parts.append(f"KV pool {self.kv_pool_gib:.2f} GiB for {self.kv_pool_tokens:,} "
                         f"tokens ({self.kv_bytes_per_token:,} B/token)")
        if self.graphs_gib:
            parts.append(f"graphs {self.graphs_gib:.2f} GiB")
        if "headroom" in self.mem_available_gib:
            parts.append(f"{self.mem_available_gib['headroom']:.2f} GiB left serving")
        return ", ".join(parts) or "nothing printed"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["mem_available_gib"] = dict(self.mem_available_gib)
        out["kv_bytes_per_token"] = self.kv_bytes_per_token
        return out


MARKS = {"starting": "before_load", "loading weights": "after_load",
         "KV allocation": "after_kv", "graph capture": "after_kv"}
"""The boot phase a reading was taken in -> the milestone its last reading stands for
(the last one while loading is the memory after the load, and so on)."""


@dataclass
class MemoryMarks:
    """The lowest MemAvailable of the lane's nodes at each boot milestone, from the
    readings the serve already makes while a lane boots: the last reading taken in
    each phase (before the load, after it, after the KV cache), and the latest
    (what is left when serving). A phase shorter than the poll leaves no mark."""

    now_kib: dict[str, int] = field(default_factory=dict)
    marks_gib: dict[str, float] = field(default_factory=dict)

    def read(self, node: str, available_kib: int, phase: str) -> None:
        self.now_kib[node] = available_kib
        mark = MARKS.get(phase)
        if mark is not None:
            self.marks_gib[mark] = round(min(self.now_kib.values()) / 1024 / 1024, 3)

    def to_json(self) -> dict[str, float]:
        out: dict[str, float] = {m: self.marks_gib[m] for m in
                                 ("before_load", "after_load", "after_kv") if m in self.marks_gib}
        if self.now_kib:
            out["headroom"] = round(min(self.now_kib.values()) / 1024 / 1024, 3)
        return out


def boot_figures(memory_gib: Mapping[str, float], kv_tokens: int | None,
                 kv_max_len: int | None, marks: MemoryMarks | None = None) -> dict[str, Any]:
    """The serve's journal detail ``measured``: what the tracker read (None: not printed)
    and the nodes' MemAvailable at each milestone (``mem_available_gib``)."""
    return {"weights_per_rank_gib": memory_gib.get("weights"),
            "kv_pool_gib": memory_gib.get("kv"), "kv_pool_tokens": kv_tokens,
            "graphs_gib": memory_gib.get("graphs"), "max_model_len": kv_max_len,
            "mem_available_gib": marks.to_json() if marks is not None else {}}


def boot_of(wf: str, t: float, detail: Mapping[str, Any]) -> BootFigures | None:
    """The figures of one serve ``end`` entry (wf, t, detail) when it was a
    successful boot that measured something, else None."""
    m = detail.get("measured")
    if detail.get("outcome") != "ready" or not isinstance(m, Mapping):
        return None
    marks = m.get("mem_available_gib")
    return BootFigures(wf, t, str(detail.get("cluster")), _f(m.get("weights_per_rank_gib")),
                       _f(m.get("kv_pool_gib")), _i(m.get("kv_pool_tokens")),
                       _f(m.get("graphs_gib")), _i(m.get("max_model_len")),
                       {str(k): float(v) for k, v in marks.items()
                        if isinstance(v, int | float)} if isinstance(marks, Mapping) else {})


def measured_boots(ends: Iterable[tuple[str, float, Mapping[str, Any]]], recipe: str,
                   cluster: str) -> list[BootFigures]:
    """Every successful serve of ``recipe`` on ``cluster`` that measured something,
    oldest first, from (wf, t, detail) of the journal's serve ``end`` entries."""
    out = [b for wf, t, d in ends
           if d.get("recipe") == recipe and d.get("cluster") == cluster
           and (b := boot_of(wf, t, d)) is not None]
    return sorted(out, key=lambda b: b.at)


def last_boot(ends: Iterable[tuple[str, float, Mapping[str, Any]]], recipe: str,
              cluster: str) -> BootFigures | None:
    """The newest of `measured_boots`."""
    boots = measured_boots(ends, recipe, cluster)
    return boots[-1] if boots else None


def recordable(b: BootFigures, drafter_kv_bytes_per_token: int = 0) -> dict[str, float | int]:
    """The boot's figures as recipe keys, for the record path (ops/recipe_record.py):
    weights per rank and the model's KV bytes per token (the pool's bytes per
    token hold the drafter's KV group, which the recipe keeps apart)."""
    out: dict[str, float | int] = {}
    if b.weights_per_rank_gib:
        out["model.weights_per_rank_gib"] = round(b.weights_per_rank_gib, 2)
    if b.kv_bytes_per_token:
        out["model.kv_bytes_per_token"] = max(1, b.kv_bytes_per_token - drafter_kv_bytes_per_token)
    return out


LINEAR_TOLERANCE = 0.02
"""KV bytes per token of two boots agreeing within 2 % is one line through the
origin (the pool is tokens x bytes per token, whatever the pin or window)."""


@dataclass(frozen=True)
class KvLinearity:
    """Whether the boots' KV pools are one line (pool bytes = tokens x bytes per
    token) across different pins or windows: the seeds' "confirm it is linear"."""

    linear: bool
    boots: tuple[BootFigures, ...]
    """The boots compared (each a different pool size or window)."""
    spread: float
    """(largest - smallest) / smallest of their KV bytes per token."""

    def describe(self) -> str:
        bpts = [b.kv_bytes_per_token or 0 for b in self.boots]
        pools = ", ".join(f"{b.kv_pool_gib:.2f} GiB/{b.kv_pool_tokens:,} tokens"
                          + (f" at window {b.max_model_len:,}" if b.max_model_len else "")
                          for b in self.boots)
        head = (f"KV bytes per token checked linear over {len(self.boots)} boots ({pools}): "
                f"{min(bpts):,}..{max(bpts):,} B/token, spread {self.spread * 100:.1f} %")
        if self.linear:
            return head + f" (within {LINEAR_TOLERANCE * 100:g} %): linear"
        return (head + f": NOT linear (beyond {LINEAR_TOLERANCE * 100:g} %) -> the pool is "
                "not tokens x one figure: the newest boot's figure is used; check the KV "
                "dtype and the drafter's KV group of each boot")

    def to_json(self) -> dict[str, Any]:
        return {"linear": self.linear, "spread": round(self.spread, 4),
                "boots": [{"boot": b.boot, "kv_pool_gib": b.kv_pool_gib,
                           "kv_pool_tokens": b.kv_pool_tokens, "max_model_len": b.max_model_len,
                           "kv_bytes_per_token": b.kv_bytes_per_token} for b in self.boots]}


def kv_linearity(boots: Sequence[BootFigures]) -> KvLinearity | None:
    """The linearity check over boots whose KV figures differ in pool size or
    window (the newest of each); None when fewer than two such boots measured KV."""
    newest: dict[tuple[float | None, int | None], BootFigures] = {}
    for b in sorted(boots, key=lambda b: b.at):
        if b.kv_bytes_per_token:
            newest[(b.kv_pool_gib, b.max_model_len)] = b
    kept = tuple(sorted(newest.values(), key=lambda b: b.at))
    if len(kept) < 2:
        return None
    bpts = [b.kv_bytes_per_token or 0 for b in kept]
    spread = (max(bpts) - min(bpts)) / min(bpts)
    return KvLinearity(spread <= LINEAR_TOLERANCE, kept, spread)


def _f(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _i(v: object) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None
