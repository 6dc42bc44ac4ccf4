"""A GB10 node's unified memory: what the kernel reports (/proc/meminfo,
/proc/pressure/memory) and what CUDA admits, from what the containers hold.

Budget (GiB): `usable` (121.6) = `os` (kernel, services; never reclaimable)
+ `cache` (page cache and driver reservations: reclaimable, but not reported
free to CUDA — hence GB10's ~12.8 GiB "baseline reservation" at admission)
+ what containers hold. Within the last few GiB the kernel stalls tasks to
reclaim (PSI `some` rises, journald flushes caches); holdings beyond
`usable - os` are thrash (PSI `full` climbs towards 100 %).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

GIB = 1024**3
KIB = 1024
RECLAIM_STALL_GIB = 4.0
"""Below this much headroom the kernel stalls tasks to reclaim (PSI `some` rises)."""
MEMTOTAL_KB = 127600748
"""GB10's MemTotal (REFERENCE.md §4)."""


@dataclass
class Psi:
    avg10: float = 0.0
    avg60: float = 0.0
    avg300: float = 0.0
    total_us: float = 0.0

    def advance(self, dt: float, target: float) -> None:
        """Exponential averages over `dt` seconds at a constant stall `target` (%)."""
        if dt <= 0:
            return
        self.avg10 = target + (self.avg10 - target) * math.exp(-dt / 10.0)
        self.avg60 = target + (self.avg60 - target) * math.exp(-dt / 60.0)
        self.avg300 = target + (self.avg300 - target) * math.exp(-dt / 300.0)
        self.total_us += target / 100.0 * dt * 1e6

    def line(self, kind: str) -> str:
        return (f"{kind} avg10={self.avg10:.2f} avg60={self.avg60:.2f} "
                f"avg300={self.avg300:.2f} total={int(self.total_us)}")


@dataclass
class Memory:
    usable_gib: float = 121.6
    os_gib: float = 2.82
    cache_gib: float = 10.0
    holdings: dict[str, float] = field(default_factory=dict)
    """Bytes held per container id."""
    some: Psi = field(default_factory=Psi)
    full: Psi = field(default_factory=Psi)
    last_t: float = 0.0

    def held_gib(self) -> float:
        return sum(self.holdings.values()) / GIB

    def headroom_gib(self) -> float:
        """Memory left before demand exceeds what the kernel can give (negative = thrash)."""
        return self.usable_gib - self.os_gib - self.held_gib()

    def admission_free_gib(self) -> float:
        """What CUDA reports free at engine start (vLLM's admission check)."""
        return max(0.0, self.headroom_gib() - self.cache_gib)

    @property
    def thrashing(self) -> bool:
        return self.headroom_gib() < 0

    def targets(self) -> tuple[float, float]:
        """Stall percentages (some, full) the averages tend to at this demand: none
        with a few GiB to spare, reclaim stalls as the last GiB go, thrash beyond."""
        head = self.headroom_gib()
        if head >= RECLAIM_STALL_GIB:
            return 0.0, 0.0
        if head >= 0:
            squeeze = 1.0 - head / RECLAIM_STALL_GIB
            return 40.0 * squeeze, 8.0 * squeeze * squeeze
        over = min(1.0, -head / 4.0)
        return 92.0 + 7.0 * over, 75.0 + 20.0 * over

    def set(self, owner: str, nbytes: float) -> None:
        if nbytes <= 0:
            self.holdings.pop(owner, None)
        else:
            self.holdings[owner] = nbytes

    def advance(self, t: float) -> None:
        """Bring the pressure averages to time `t` (demand is constant between events)."""
        dt = t - self.last_t
        if dt > 0:
            some, full = self.targets()
            self.some.advance(dt, some)
            self.full.advance(dt, full)
            self.last_t = t

    def reset(self, t: float) -> None:
        """Power cycle: nothing held, no pressure history."""
        self.holdings.clear()
        self.some, self.full, self.last_t = Psi(), Psi(), t

    def pressure_text(self) -> str:
        return self.some.line("some") + "\n" + self.full.line("full") + "\n"

    def meminfo_text(self) -> str:
        total_kb = MEMTOTAL_KB
        held_kb = int(self.held_gib() * GIB / KIB)
        os_kb = int(self.os_gib * GIB / KIB)
        usable_kb = int(self.usable_gib * GIB / KIB)
        avail_kb = max(0, usable_kb - os_kb - held_kb)
        cache_kb = min(int(self.cache_gib * GIB / KIB), avail_kb)
        free_kb = max(0, avail_kb - cache_kb)
        if self.thrashing:
            avail_kb = free_kb = 0
            cache_kb = 180_000
        buffers_kb = min(cache_kb, 412_344)
        cached_kb = cache_kb - buffers_kb
        anon_kb = held_kb + os_kb // 2
        rows: list[tuple[str, int, bool]] = [
            ("MemTotal", total_kb, True), ("MemFree", free_kb, True),
            ("MemAvailable", avail_kb, True), ("Buffers", buffers_kb, True),
            ("Cached", cached_kb, True), ("SwapCached", 0, True),
            ("Active", anon_kb // 2 + cached_kb // 2, True),
            ("Inactive", anon_kb // 2 + cached_kb // 2, True),
            ("Active(anon)", anon_kb // 2, True), ("Inactive(anon)", anon_kb // 2, True),
            ("Active(file)", cached_kb // 2, True), ("Inactive(file)", cached_kb // 2, True),
            ("Unevictable", 30_720, True), ("Mlocked", 30_720, True),
            ("SwapTotal", 0, True), ("SwapFree", 0, True), ("Zswap", 0, True),
            ("Zswapped", 0, True), ("Dirty", 1_204, True), ("Writeback", 0, True),
            ("AnonPages", anon_kb, True), ("Mapped", 1_480_112, True),
            ("Shmem", 75_268, True), ("KReclaimable", 310_272, True),
            ("Slab", 722_816, True), ("SReclaimable", 310_272, True),
            ("SUnreclaim", 412_544, True), ("KernelStack", 24_640, True),
            ("PageTables", 48_512, True), ("SecPageTables", 0, True),
            ("NFS_Unstable", 0, True), ("Bounce", 0, True), ("WritebackTmp", 0, True),
            ("CommitLimit", total_kb // 2, True), ("Committed_AS", anon_kb + 4_213_880, True),
            ("VmallocTotal", 133_143_592_960, True), ("VmallocUsed", 190_464, True),
            ("VmallocChunk", 0, True), ("Percpu", 27_136, True),
            ("HardwareCorrupted", 0, True), ("AnonHugePages", 0, True),
            ("ShmemHugePages", 0, True), ("ShmemPmdMapped", 0, True),
            ("FileHugePages", 0, True), ("FilePmdMapped", 0, True),
            ("CmaTotal", 0, True), ("CmaFree", 0, True),
            ("HugePages_Total", 0, False), ("HugePages_Free", 0, False),
            ("HugePages_Rsvd", 0, False), ("HugePages_Surp", 0, False),
            ("Hugepagesize", 2048, True), ("Hugetlb", 0, True),
        ]
        out = []
        for name, value, kb in rows:
            label = f"{name}:"
            out.append(f"{label:<16}{value:8d} kB" if kb else f"{label:<16}{value:8d}")
        return "\n".join(out) + "\n"


@dataclass(frozen=True)
class PrefillTruth:
    """What a prefill of N prompt tokens really takes on each rank's host, in the
    simulator: ``a + b·N`` GiB at a chunk size (``--max-num-batched-tokens``), and
    the KV bytes per token the engine really allocates. Hidden from the product:
    the recipes' ``[fit]`` coefficients are guesses the envelope ladder
    (``sparktui envelope``) must recover by measuring, never read here."""

    a_gib: float
    b_gib_per_token: float
    kv_bytes_per_token: int | None = None
    """None: the recipe's figure is the engine's."""

    def scratch_gib(self, tokens: int) -> float:
        return self.a_gib + self.b_gib_per_token * tokens


PREFILL_TRUTH: dict[tuple[str, int], PrefillTruth] = {
    # The full GLM-5.3 MXFP4xFP8 (r39): 34 KiB/token at 4096-token chunks, so the 22:45
    # prompt (~150K tokens beside an 11 GiB pin, 4.92 GiB left) overruns the host while
    # 64K fits; 30 KiB/token at 2048 (smaller chunks = smaller scratch), so the safe
    # lane's 131072 fits beside its 6 GiB pin. The engine's KV is 46 KiB/token/rank,
    # not the night's 52.7 KB (a 6 GiB pin holds one 131072 request, as the lane ran).
    ("jovian-judgement/GLM-5.3-MXFP4-FP8", 4096): PrefillTruth(0.6, 34 / 1024 / 1024, 47_104),
    ("jovian-judgement/GLM-5.3-MXFP4-FP8", 2048): PrefillTruth(0.4, 30 / 1024 / 1024, 47_104),
}


def prefill_truth(repo: str, batched_tokens: int) -> PrefillTruth | None:
    """The simulator's truth for ``repo`` at this chunk size; None: the engine
    follows the recipe's own figures (models the ladder is not tested on)."""
    return PREFILL_TRUTH.get((repo, batched_tokens))
