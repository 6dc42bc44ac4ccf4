"""The memory envelope of a recipe on a cluster, per rank (pure arithmetic).

What it checks, in the order the incidents taught them:

1. GB10 admission: vLLM refuses to start when GMU x node memory exceeds the
   free memory the GB10 reports at startup (108.78 GiB of 121.6: the lab
   policy's GMU 0.91 asks 110.7 GiB and is refused; 0.85 is admitted).
2. Weights: weights per rank plus the resident extras (drafter, pinned engram,
   runtime reserve) must fit the GMU budget — and, with a KV pin, the node
   (Boot D: 510 GB eager on 4 ranks = 127.6 GB/node > 121.6 GiB).
3. KV: one max-length request (max_model_len x KV bytes per token, the
   drafter's KV group included) must fit the KV pin or what the GMU budget
   leaves (boot 5: an 8 GiB pin 0.08 GiB short of 8.08 GiB).
4. Prefill scratch, where the recipe carries a coefficient: the longest
   prompt whose scratch fits beside everything else must cover max_model_len
   (the 22:45 incident: ~150K tokens with an 11 GiB pin hung two hosts).

Units: GiB = 2^30 bytes, GB = 10^9 bytes (sizes on disk).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .config import Config
from .measured import BootFigures
from .recipe import Recipe

GIB = 1024**3
GB = 10**9


@dataclass(frozen=True)
class FitReport:
    recipe: str
    cluster: str
    ranks: int
    tp: int
    verdict: str
    """``fits``, ``refused``, or ``unknown``: nothing refused, but a figure the
    verdict depends on is unknown (``unknowns``), so it is not a fit either."""
    weights_per_rank_gb: float
    weights_per_rank_gib: float
    weights_measured: bool
    resident_gib: float
    """Weights + drafter weights + pinned extras + runtime reserve, per rank."""
    gmu: float
    gmu_budget_gib: float
    admission_free_gib: float
    max_admissible_gmu: float
    kv_pinned: bool
    kv_available_gib: float
    kv_bytes_per_token: int
    """Per rank, the drafter's KV group included; 0 when not measured."""
    kv_needed_gib: float | None
    kv_needed_gb: float | None
    max_window_tokens: int | None
    pool_tokens: int | None
    concurrency: float | None
    longest_safe_prompt_tokens: int | None
    margin_gib: float
    """Smallest slack of all checks (negative when refused)."""
    min_ranks_to_fit: int | None
    reasons: list[str] = field(default_factory=list)
    """Why it is refused, with the numbers and what would make it pass."""
    notes: list[str] = field(default_factory=list)
    unknowns: list[str] = field(default_factory=list)
    """Figures the verdict depends on that are unknown (0 or missing), and how to
    measure them; an unknown figure never turns a refusal into a fit."""

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 4)
        return out


def ranks_for(config: Config, recipe: Recipe, cluster: str) -> tuple[int, int, list[str]]:
    """(ranks, tp, notes): one rank per node; TP scales to the cluster."""
    ranks = len(config.clusters[cluster].nodes)
    pp = recipe.parallel.pp
    tp = max(1, ranks // pp)
    notes = []
    if recipe.parallel.tp and recipe.parallel.tp * pp != ranks:
        notes.append(f"TP scaled from {recipe.parallel.tp} (qualified on {recipe.cluster}) "
                     f"to {tp} for {cluster}")
    return ranks, tp, notes


def weights_per_rank_gib(config: Config, recipe: Recipe, shards: int) -> tuple[float, bool]:
    """Weights resident per rank when the model is split `shards` ways.

    A measured figure is scaled by the qualified cluster's rank count when the
    recipe runs on a cluster of another size.
    """
    measured = recipe.model.weights_per_rank_gib
    if measured is not None:
        qualified = len(config.clusters[recipe.cluster].nodes) if recipe.cluster in \
            config.clusters else shards
        return measured * qualified / shards, True
    return recipe.model.size_gb * GB / shards / GIB, False


def fit(config: Config, recipe: Recipe, cluster: str,
        boot: BootFigures | None = None) -> FitReport:
    """``boot``: what the last successful boot of the recipe on ``cluster`` measured
    (core/measured.py); its figures are used before the recipe's typed or derived ones."""
    g = config.guards
    e = recipe.engine_args
    spec = recipe.speculative
    ranks, tp, notes = ranks_for(config, recipe, cluster)
    shards = tp * recipe.parallel.pp
    weights_gib, measured = weights_per_rank_gib(config, recipe, shards)
    if boot is not None and boot.weights_per_rank_gib:
        weights_gib, measured = boot.weights_per_rank_gib, True
    weights_gb = weights_gib * GIB / GB
    drafter_gib = (spec.drafter_weights_gb * GB / GIB) if spec else 0.0
    extras_gib = recipe.fit.pinned_extras_gib
    reserve_gib = (recipe.fit.runtime_reserve_gib if recipe.fit.runtime_reserve_gib is not None
                   else g.runtime_reserve_gib)
    resident = weights_gib + drafter_gib + extras_gib + reserve_gib

    budget = e.gpu_memory_utilization * g.node_memory_gib
    max_gmu = math.floor(g.admission_free_gib / g.node_memory_gib * 100) / 100
    reasons: list[str] = []
    slacks: list[float] = []

    # 1. admission
    slacks.append(g.admission_free_gib - budget)
    if budget > g.admission_free_gib:
        reasons.append(
            f"GB10 admission: GMU {e.gpu_memory_utilization:g} asks for {budget:.2f} GiB "
            f"({e.gpu_memory_utilization:g} x {g.node_memory_gib:g} GiB) but only "
            f"{g.admission_free_gib:.2f} GiB is free at startup (free {g.admission_free_gib:.2f} < "
            f"{budget:.2f} required) -> set gpu_memory_utilization <= {max_gmu:.2f}")

    # 2. weights
    pinned = e.kv_cache_memory_gib is not None
    what = (f"weights per rank {weights_gb:.1f} GB ({weights_gib:.2f} GiB"
            f"{', measured' if measured else ''})")
    parts = [what]
    if drafter_gib:
        parts.append(f"drafter {drafter_gib:.2f} GiB")
    if extras_gib:
        parts.append(f"pinned extras {extras_gib:.2f} GiB")
    parts.append(f"runtime {reserve_gib:.2f} GiB")
    resident_text = " + ".join(parts) + f" = {resident:.2f} GiB"
    kv_available = (e.kv_cache_memory_gib if e.kv_cache_memory_gib is not None
                    else budget - resident)
    ceiling = g.node_memory_gib if pinned else budget
    ceiling_text = (f"the node's {g.node_memory_gib:g} GiB" if pinned else
                    f"the GMU budget of {budget:.2f} GiB "
                    f"({e.gpu_memory_utilization:g} x {g.node_memory_gib:g} GiB)")
    used = resident + (kv_available if pinned else 0.0)
    slacks.append(ceiling - used if pinned else kv_available)
    min_ranks = _min_ranks(config, recipe, drafter_gib + extras_gib + reserve_gib, ceiling)
    if (pinned and used > ceiling) or (not pinned and kv_available <= 0):
        over = f"{resident_text}{f' + KV pin {kv_available:.2f} GiB' if pinned else ''}"
        hint = (f"serve on >= {min_ranks} ranks" if min_ranks and min_ranks > shards
                else "lower the KV pin or the runtime reserve")
        reasons.append(f"{over} exceed {ceiling_text}: every rank would OOM-thrash during "
                       f"load -> {hint}, or load lazily / keep engram on disk")
        if weights_gib + reserve_gib > g.node_memory_gib:
            reasons.append(f"{weights_gb:.1f} GB/node + process > {g.node_memory_gib:g} GiB "
                           f"node memory")

    # 3. KV for one max-length request
    # the model's own KV size, not the drafter's: a drafter-only figure is a window
    # ~25x too large ("largest window 1,561,806" for a refused pin)
    kv_known = recipe.model.kv_bytes_per_token > 0 or bool(boot and boot.kv_bytes_per_token)
    bpt = recipe.model.kv_bytes_per_token + (spec.drafter_kv_bytes_per_token if spec else 0)
    if boot is not None and (seen := boot.kv_bytes_per_token):
        if bpt and abs(seen / bpt - 1) > 0.02:
            notes.append(
                f"KV bytes per token: boot {boot.boot} measured {seen:,} B/token/rank "
                f"({boot.kv_pool_tokens:,} tokens in {boot.kv_pool_gib:.2f} GiB); the recipe's "
                f"{bpt:,} is the assumption doubted (it would refuse what that boot served)")
        bpt = seen
    kv_needed_gib = kv_needed_gb = None
    max_window = pool = None
    concurrency = None
    if kv_known and bpt > 0 and kv_available > 0:
        kv_bytes = kv_available * GIB
        kv_needed_b = e.max_model_len * bpt
        kv_needed_gib, kv_needed_gb = kv_needed_b / GIB, kv_needed_b / GB
        max_window = pool = int(kv_bytes // bpt)
        concurrency = pool / e.max_model_len
        slacks.append(kv_available - kv_needed_gib)
        if kv_needed_gib > kv_available:
            holder = "the KV pin holds" if pinned else "the GMU budget leaves"
            drafter = (" incl. the drafter KV group"
                       if spec and spec.drafter_kv_bytes_per_token else "")
            fix = (f"raise kv_cache_memory_gib to >= {math.ceil(kv_needed_gib * 100) / 100:.2f}"
                   if pinned else "lower the resident memory or raise GMU within admission")
            reasons.append(
                f"KV: one {e.max_model_len:,}-token request needs {kv_needed_gib:.2f} GiB "
                f"({kv_needed_gb:.2f} GB at {bpt:,} B/token/rank"
                f"{drafter}"
                f") but {holder} {kv_available:.2f} GiB, short by "
                f"{kv_needed_gib - kv_available:.2f} GiB -> {fix} or cap max_model_len at "
                f"{max_window:,}")
    unknowns: list[str] = []
    if not kv_known and not pinned:
        notes.append("KV bytes per token not measured: the window is not checked here "
                     "(the engine sizes its own pool and refuses a window it cannot hold; "
                     "measure: KV pool GiB / pool tokens)")
    elif not kv_known:  # a pin's whole point is the window it holds: that is the verdict
        unknowns.append(f"KV bytes per token is unknown (model.kv_bytes_per_token = "
                        f"{recipe.model.kv_bytes_per_token}): a {e.max_model_len:,}-token "
                        f"request cannot be checked -> measure it (KV pool GiB / pool tokens "
                        f"in the engine's boot log) and `sparktui record`")
    if weights_gib <= 0:
        unknowns.append("weights per rank are unknown (model.size_gb and "
                        "model.weights_per_rank_gib are 0) -> record the measured figure")

    # 4. prefill scratch
    longest = None
    f = recipe.fit
    if f.prefill_ceiling_tokens is not None:
        # measured by `sparktui envelope` on the hosts themselves: it knows what this
        # arithmetic does not (the OS, the page cache, the reserve a prefill must leave)
        longest = f.prefill_ceiling_tokens
        if longest < e.max_model_len:
            reasons.append(
                f"prefill scratch: the longest safe prompt measured by sparktui envelope is "
                f"{longest:,} tokens, shorter than max_model_len {e.max_model_len:,} (a "
                f"longer prompt hangs the host) -> cap max_model_len at {longest:,} or lower "
                f"the KV pin")
    elif f.prefill_scratch_base_gib is not None and f.prefill_scratch_gib_per_token:
        headroom = g.node_memory_gib - resident - max(kv_available, 0.0)
        longest = max(0, int((headroom - f.prefill_scratch_base_gib)
                             // f.prefill_scratch_gib_per_token))
        need = f.prefill_scratch_base_gib + f.prefill_scratch_gib_per_token * e.max_model_len
        slacks.append(headroom - need)
        if longest < e.max_model_len:
            reasons.append(
                f"prefill scratch: a {e.max_model_len:,}-token prompt needs ~{need:.2f} GiB but "
                f"only {headroom:.2f} GiB is left beside weights, KV and runtime; the longest "
                f"safe prompt is {longest:,} tokens (a longer one hangs the host) -> cap "
                f"max_model_len at {longest:,} or lower the KV pin")

    if not measured:
        notes.append(f"weights per rank derived from {recipe.model.size_gb:g} GB / {shards} ranks")
    return FitReport(
        recipe=recipe.name, cluster=cluster, ranks=ranks, tp=tp,
        verdict="refused" if reasons else ("unknown" if unknowns else "fits"),
        weights_per_rank_gb=weights_gb, weights_per_rank_gib=weights_gib,
        weights_measured=measured, resident_gib=resident,
        gmu=e.gpu_memory_utilization, gmu_budget_gib=budget,
        admission_free_gib=g.admission_free_gib, max_admissible_gmu=max_gmu,
        kv_pinned=pinned, kv_available_gib=kv_available, kv_bytes_per_token=bpt,
        kv_needed_gib=kv_needed_gib, kv_needed_gb=kv_needed_gb,
        max_window_tokens=max_window, pool_tokens=pool, concurrency=concurrency,
        longest_safe_prompt_tokens=longest, margin_gib=min(slacks),
        min_ranks_to_fit=min_ranks, reasons=reasons, notes=notes, unknowns=unknowns,
    )


def _min_ranks(config: Config, recipe: Recipe, fixed_gib: float, ceiling: float) -> int | None:
    """The fewest ranks whose weight share fits beside the fixed per-rank memory."""
    for n in range(1, len(config.nodes) + 1):
        weights, _ = weights_per_rank_gib(config, recipe, n)
        if weights + fixed_gib < ceiling:
            return n
    return None
