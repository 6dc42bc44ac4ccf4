"""OOM-thrash rules for one node: ok -> pressure -> thrash suspected -> thrash.

Inputs per poll tick (a :class:`NodeSample`) plus kernel-journal and engine
events. Thresholds come from :class:`~sparktui.core.config.ThrashConfig`,
whose defaults follow the daemons operators already run (REFERENCE.md §7):

- ``psi_some_pressure`` 10 %: journald's "Under memory pressure" trigger
  (some stalls of 200 ms in 2 s), "an early signal, not yet thrash": it
  and low MemAvailable make *pressure*, never more on their own (a lane
  idling with 4 GiB free is tight, not thrashing).
- ``psi_full_suspect`` 20 %, ``psi_full_thrash`` 60 %: systemd-oomd acts on
  full avg10 > 60 % sustained for 30 s (:data:`PSI_SUSTAIN_S`), measured
  here from the growth of the cumulative ``full total`` over the node's own
  time (its ``/proc/uptime``, read by the same fork-free script): the stall
  microseconds and the seconds they are a share of come from one clock, the
  node's, whatever clock the watcher runs on (a sentinel on wall time beside
  a simulator at 60x once read "1419 % of wall time").
- ``mem_available_low_gib`` / ``_frac``: the GB10 community runs earlyoom at
  512 MiB..2 GiB; nohang's soft threshold is 6 %.

On GB10, NVRM ``NV_ERR_NO_MEMORY`` lines also appear during healthy engine
starts, and hosts wedge without an OOM kill (REFERENCE.md §4): kernel lines
never raise a level. They are listed as evidence, and they turn an SSH
stall into thrash: the field signature is "ping answers, sshd does not"
with memory exhausted (or the kernel complaining about it) just before.
PSI and MemAvailable decide pressure and suspicion; engine stalls (RPC
timeouts, no throughput with requests running) escalate existing pressure.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from sparktui.core.advice import (
    PRESSURE_NEXT,
    cycle_next_step,
    retry_next_step,
    thrash_next_step,
)
from sparktui.core.config import ThrashConfig
from sparktui.core.logsig import Kind, LogEvent

PSI_SUSTAIN_S = 30.0
"""systemd-oomd's DefaultMemoryPressureDurationSec."""
EVIDENCE_WINDOW_S = 120.0
"""Kernel and engine lines count for this long before the node was last seen
answering (while it answers: before now). A node that went dark is judged
on the memory of its last good sample and the lines that led up to it."""
MEM_TREND_S = 30.0
"""MemAvailable's trend is measured over at least this long (evidence only)."""
GIB_KIB = 1024 * 1024
RETURN_GRACE_S = 600.0
"""A node seen powered off is *coming back*, not starved, while it pings and
its SSH does not answer yet, until its first good probe or this long of the
node's own time after it was seen off (a GB10 boots in 2-4 min; past this a
silent sshd is evidence again). The node cannot be read while it boots, so
its time is the watcher's scaled by the node's rate (:meth:`ThrashRules.node_rate`:
its uptime's pace over the watcher's, from its last boot's samples): a
sentinel on wall time beside a simulator at 60x once waited 600 wall s, ten
of the node's hours."""


class ThrashLevel(IntEnum):
    OK = 0
    PRESSURE = 1
    SUSPECTED = 2
    THRASH = 3

    @property
    def label(self) -> str:
        return {0: "ok", 1: "pressure", 2: "thrash suspected", 3: "thrash"}[self.value]


@dataclass(frozen=True)
class NodeSample:
    """What one poll tick saw of a node (None = not known this tick)."""

    at: float
    """When the watcher took it, on the watcher's clock (the one its log lines
    and probe failures are stamped on): evidence windows and SSH retries."""
    probe_ok: bool
    """The SSH probe answered within its timeout."""
    ping_ok: bool | None = None
    psi_some_avg10: float | None = None
    psi_full_avg10: float | None = None
    psi_full_total_us: int | None = None
    mem_available_kib: int | None = None
    mem_total_kib: int | None = None
    slow_tier_error: str = ""
    """The probe's fast tier (/proc, no fork) answered but its slow tier
    (docker, df) did not: evidence, never an SSH stall (a failed sample is
    always a failed fast tier, which runs first)."""
    uptime_s: float | None = None
    """The node's /proc/uptime when PSI and meminfo were read (same script):
    the node's clock, on which PSI's total and MemAvailable move. Their rates
    are taken over its deltas, never over ``at``'s."""


@dataclass(frozen=True)
class ThrashVerdict:
    node: str
    level: ThrashLevel
    evidence: tuple[str, ...]
    next_step: str
    failed_probes: int


def _below(x: float, limit: str) -> str:
    """``x`` as it prints beside ``< limit``: to one decimal unless that reads
    as the limit or above (4.98 beside 5 is "4.98", not "5.0 < 5")."""
    for digits in range(1, 10):
        if float(text := f"{x:.{digits}f}") < float(limit):
            return text
    return f"{math.floor(x * 1e9) / 1e9:.9f}"


def _low_memory(gib: float, frac: float | None, cfg: ThrashConfig, low_gib: bool,
                low_frac: bool) -> str:
    """The low-MemAvailable evidence naming the threshold(s) that fired:
    ``MemAvailable 4.9 GiB (4.0% < 5%)`` when only the share is low, ``3.0 GiB
    < 4 GiB (2.5% < 5%)`` when both are ("< 4 GiB or 5%" read as false beside
    4.9 GiB, issue 28 item 7)."""
    gib_limit = f"{cfg.mem_available_low_gib:g}"
    frac_limit = f"{cfg.mem_available_low_frac * 100:g}"
    amount = f"{_below(gib, gib_limit)} GiB < {gib_limit} GiB" if low_gib else f"{gib:.1f} GiB"
    if frac is None:
        return f"MemAvailable {amount}"
    share = f"{_below(frac * 100, frac_limit)}% < {frac_limit}%" if low_frac else f"{frac:.1%}"
    return f"MemAvailable {amount} ({share})"


@dataclass
class ThrashRules:
    """Stateful rules for one node: keeps a short history for trends."""

    node: str
    config: ThrashConfig = field(default_factory=ThrashConfig)
    _samples: deque[NodeSample] = field(default_factory=lambda: deque(maxlen=256), init=False)
    _events: deque[tuple[float, LogEvent]] = field(
        default_factory=lambda: deque(maxlen=512), init=False)
    _failed_probes: int = field(default=0, init=False)
    _first_failed_at: float | None = field(default=None, init=False)
    _last_failed_at: float | None = field(default=None, init=False)
    _engine_stall: tuple[float, str] | None = field(default=None, init=False)
    _off_at: float | None = field(default=None, init=False)
    _rate: float | None = field(default=None, init=False)
    """The node's seconds per watcher second, as last measured (kept across a
    power cycle, when nothing of the node can be read)."""

    def power_cycled(self, at: float, rate: float | None = None) -> None:
        """The node was seen powered off at ``at`` (its plug said so): what
        follows until its first good probe is a boot, and an SSH that does
        not answer yet while ping does (the reconnect backing off) is no
        thrash evidence, for `RETURN_GRACE_S` of the node's time. ``rate``:
        the node's pace measured before (:meth:`node_rate` of its history)."""
        self._off_at = at
        if rate is not None:
            self._rate = rate

    def node_rate(self) -> float | None:
        """How many of the node's seconds (its uptime) pass per second of the
        watcher's clock, from the current boot's good samples (their oldest
        and newest; an uptime that went back starts a boot); else the last
        rate known; None when never measured."""
        timed = [(s.at, up) for s in self._samples
                 if s.probe_ok and (up := s.uptime_s) is not None]
        if timed:
            newest = oldest = timed[-1]
            for at, up in reversed(timed[:-1]):
                if up > oldest[1]:
                    break  # an earlier boot
                oldest = (at, up)
            if newest[0] > oldest[0] and newest[1] > oldest[1]:
                return (newest[1] - oldest[1]) / (newest[0] - oldest[0])
        return self._rate

    def _coming_back(self, now: float) -> bool:
        """Seen off, no good probe since, and less than `RETURN_GRACE_S` of
        the node's time since (the watcher's when its pace was never read)."""
        return (self._off_at is not None
                and (now - self._off_at) * (self._rate or 1.0) <= RETURN_GRACE_S)

    def add_sample(self, s: NodeSample) -> None:
        self._samples.append(s)
        if s.probe_ok:
            self._failed_probes, self._first_failed_at, self._last_failed_at = 0, None, None
            self._off_at = None
        else:
            self._failed_probes += 1
            self._last_failed_at = s.at
            if self._first_failed_at is None:
                self._first_failed_at = s.at

    def _runbook_retries_failed(self) -> int:
        """How many of the runbook's SSH retries have failed, counted in time
        as `recover` makes them: the first at the first failed probe, then one
        per ``ssh_retry_interval_s`` the node went on failing (failed polls
        every few seconds are not retries)."""
        if self._first_failed_at is None or self._last_failed_at is None:
            return 0
        span = self._last_failed_at - self._first_failed_at
        cfg = self.config
        return min(cfg.ssh_retries, 1 + int(span // cfg.ssh_retry_interval_s))

    def add_event(self, at: float, ev: LogEvent) -> None:
        """A kernel-journal line of this node or an engine line of a rank on it."""
        if ev.kind in _KERNEL or ev.kind in _ENGINE or _stalled_stats(ev):
            self._events.append((at, ev))

    def add_engine_stall(self, at: float, text: str) -> None:
        """The serving canary saw throughput collapse with requests running
        (``/metrics``): engine evidence like the zero-throughput stats lines."""
        self._engine_stall = (at, text)

    def verdict(self, now: float) -> ThrashVerdict:
        evidence: list[str] = []
        level = ThrashLevel.OK
        good = self._last_good()
        memory_bad = False
        if good is not None:
            memory_bad, level = self._memory(good, evidence)
        since = min(now, good.at if good is not None else now) - EVIDENCE_WINDOW_S
        kernel = self._counts(since, _KERNEL)
        engine = self._counts(since, _ENGINE) + self._stalled_stats_count(since)
        if self._engine_stall is not None and self._engine_stall[0] >= since:
            engine.append((self._engine_stall[1], 1))
        for text, n in kernel:
            evidence.append(f"kernel: {text} ({n}x)")
        for text, n in engine:
            evidence.append(f"engine: {text} ({n}x)")
        if engine and level >= ThrashLevel.PRESSURE:
            level = max(level, ThrashLevel.SUSPECTED)
        last = self._samples[-1] if self._samples else None
        if last is not None and last.slow_tier_error:
            evidence.append(f"docker/df did not answer ({last.slow_tier_error}); the /proc"
                            " read did, so this is not an SSH stall")
        if last is not None and not last.probe_ok:
            if self._coming_back(now):
                evidence.append(f"back from a power cycle: SSH not answering yet "
                                f"({self._failed_probes} probe(s) failed), not thrash")
            elif last.ping_ok is False:
                evidence.append(
                    f"no ping and no SSH ({self._failed_probes} probe(s) failed): node down"
                    " or network, not thrash"
                )
            else:
                ping = "ping answers, " if last.ping_ok else ""
                evidence.append(f"{ping}SSH probe failed {self._failed_probes}x in a row")
                memory_seen = memory_bad or bool(kernel) or bool(engine) or (
                    level >= ThrashLevel.PRESSURE
                )
                level = ThrashLevel.THRASH if memory_seen else max(level, ThrashLevel.SUSPECTED)
        return ThrashVerdict(
            self.node, level, tuple(evidence), self._next_step(level), self._failed_probes
        )

    # ---- internals ---------------------------------------------------------
    def _last_good(self) -> NodeSample | None:
        return next((s for s in reversed(self._samples) if s.probe_ok), None)

    def _memory(self, s: NodeSample, evidence: list[str]) -> tuple[bool, ThrashLevel]:
        cfg = self.config
        level = ThrashLevel.OK
        bad = False
        if s.mem_available_kib is not None:
            gib = s.mem_available_kib / GIB_KIB
            frac = s.mem_available_kib / s.mem_total_kib if s.mem_total_kib else None
            low_gib = gib < cfg.mem_available_low_gib
            low_frac = frac is not None and frac < cfg.mem_available_low_frac
            if low_gib or low_frac:
                bad = True
                evidence.append(_low_memory(gib, frac, cfg, low_gib, low_frac))
                level = ThrashLevel.PRESSURE
        some, full = s.psi_some_avg10, s.psi_full_avg10
        if some is not None and some >= cfg.psi_some_pressure:
            evidence.append(f"PSI some avg10 {some:.1f}% >= {cfg.psi_some_pressure:g}%")
            level = max(level, ThrashLevel.PRESSURE)
        if full is not None and full >= cfg.psi_full_suspect:
            bad = True
            evidence.append(f"PSI full avg10 {full:.1f}% >= {cfg.psi_full_suspect:g}%")
            level = max(level, ThrashLevel.SUSPECTED)
        sustained = self._full_stall_fraction()
        if sustained is not None and sustained * 100 >= cfg.psi_full_thrash:
            bad = True
            evidence.append(
                f"PSI full total grew {sustained:.0%} of the node's time over"
                f" {PSI_SUSTAIN_S:.0f} s of its uptime (>= {cfg.psi_full_thrash:g}%,"
                " systemd-oomd)"
            )
            level = ThrashLevel.THRASH
        if level >= ThrashLevel.PRESSURE and (rate := self._mem_fall_gib_per_min()):
            evidence.append(f"MemAvailable falling {rate:.1f} GiB/min")
        return bad, level

    def _node_span(self, has: Callable[[NodeSample], bool], at_least: float
                   ) -> tuple[NodeSample, NodeSample, float] | None:
        """(older, newest, node seconds between them): the newest good sample
        with ``has`` and the latest one at least ``at_least`` seconds before it
        on the node's clock (its uptime), within the same boot."""
        newest: NodeSample | None = None
        for s in reversed(self._samples):
            if not s.probe_ok or s.uptime_s is None or not has(s):
                continue
            if newest is None:
                newest = s
                continue
            assert newest.uptime_s is not None
            span = newest.uptime_s - s.uptime_s
            if span < 0:
                return None  # the node rebooted in between: another boot's counters
            if span >= at_least:
                return s, newest, span
        return None

    def _mem_fall_gib_per_min(self) -> float | None:
        """How fast MemAvailable fell over the node's last ≥ MEM_TREND_S (None
        if not falling)."""
        got = self._node_span(lambda s: s.mem_available_kib is not None, MEM_TREND_S)
        if got is None:
            return None
        old, new, span = got
        fell = ((old.mem_available_kib or 0) - (new.mem_available_kib or 0)) / GIB_KIB
        rate = fell / span * 60
        return rate if rate >= 0.1 else None

    def _full_stall_fraction(self) -> float | None:
        """Share of the node's last ≥ PSI_SUSTAIN_S in which all tasks were
        stalled: PSI's full total grown over the node's uptime grown."""
        got = self._node_span(lambda s: s.psi_full_total_us is not None, PSI_SUSTAIN_S)
        if got is None:
            return None
        old, new, span = got
        grown = (new.psi_full_total_us or 0) - (old.psi_full_total_us or 0)
        return grown / (span * 1e6) if grown >= 0 else None

    def _counts(self, since: float, kinds: dict[Kind, str]) -> list[tuple[str, int]]:
        counts: dict[str, int] = {}
        for at, ev in self._events:
            if at >= since and ev.kind in kinds:
                counts[kinds[ev.kind]] = counts.get(kinds[ev.kind], 0) + 1
        return list(counts.items())

    def _stalled_stats_count(self, since: float) -> list[tuple[str, int]]:
        n = sum(1 for at, ev in self._events if at >= since and _stalled_stats(ev))
        return [("Running > 0 reqs with prompt throughput 0.0", n)] if n >= 2 else []

    def _next_step(self, level: ThrashLevel) -> str:
        cfg = self.config
        if level is ThrashLevel.OK:
            return ""
        if level is ThrashLevel.PRESSURE:
            return PRESSURE_NEXT
        if self._failed_probes == 0:
            return thrash_next_step(cfg.ssh_retries, cfg.ssh_retry_interval_s)
        retries = self._runbook_retries_failed()
        if retries < cfg.ssh_retries:
            return retry_next_step(retries, cfg.ssh_retries, cfg.ssh_retry_interval_s,
                                   self.node)
        return cycle_next_step(cfg.ssh_retries, self.node)


_KERNEL: dict[Kind, str] = {
    Kind.KERNEL_PRESSURE: "Under memory pressure, flushing caches",
    Kind.KERNEL_NVRM_NOMEM: "NVRM NV_ERR_NO_MEMORY",
    Kind.KERNEL_OOM_KILL: "oom-killer",
}
_ENGINE: dict[Kind, str] = {
    Kind.RPC_TIMEOUT: "RPC call timed out",
    Kind.ENGINE_DEAD: "EngineDeadError",
    Kind.ENGINE_WAIT: "shm_broadcast wait",
}


def _stalled_stats(ev: LogEvent) -> bool:
    """vLLM's stats line with requests running but no throughput at all
    (prompt 0.0 and generation 0.0: a decode-only batch is healthy)."""
    if ev.kind is not Kind.STATS or "prompt_tps" not in ev.fields:
        return False
    try:
        running = int(ev.fields.get("running", "0"))
        prompt = float(ev.fields["prompt_tps"])
        gen = float(ev.fields.get("gen_tps", "0"))
    except ValueError:
        return False
    return running > 0 and prompt == 0.0 and gen == 0.0
