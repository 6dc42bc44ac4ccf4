"""The OOM-thrash detector: node snapshots from the poller plus each node's
kernel journal and journald's notices (``journalctl -f``, see
``follower.journal_command``) and engine lines, through the rules of
core/thrash.py, into one verdict per node (level, evidence, next step).

Detection latency is one poll: the tick whose probe times out while the
liveness check still answers is the tick that flags thrash (≤ poll interval
+ probe timeout, 5 s at defaults).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Mapping

from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import ThrashConfig
from sparktui.core.logsig import LogEvent, classify
from sparktui.core.state import NodeSnapshot, NodeState
from sparktui.core.thrash import NodeSample, ThrashLevel, ThrashRules, ThrashVerdict
from sparktui.watch.follower import LogFollower, StreamSource

JOURNAL_TAIL_LINES = 2000


def sample_of(snap: NodeSnapshot) -> NodeSample | None:
    """What the rules need from a snapshot; None when the snapshot says
    nothing about memory health (auth or host-key failure, powered off).
    Memory, PSI and the node's uptime (the clock their rates are taken on)
    are the probe's fast tier, read fresh on every tick."""
    if snap.state in (NodeState.UNKNOWN, NodeState.POWERED_OFF):
        return None
    probe = snap.probe if snap.state is NodeState.ONLINE else None
    mem = probe.meminfo if probe else None
    psi = probe.psi if probe else None
    return NodeSample(
        at=snap.taken_at,
        probe_ok=probe is not None,
        ping_ok=snap.liveness,
        psi_some_avg10=psi.some.avg10 if psi else None,
        psi_full_avg10=psi.full.avg10 if psi and psi.full else None,
        psi_full_total_us=psi.full.total_us if psi and psi.full else None,
        mem_available_kib=mem.available_kib if mem else None,
        mem_total_kib=mem.total_kib if mem else None,
        slow_tier_error=probe.slow_error if probe else "",
        uptime_s=probe.uptime_s if probe else None,
    )


class ThrashDetector:
    """Per-node thrash rules fed by snapshots and log lines (wall-clock time)."""

    def __init__(
        self,
        config: ThrashConfig | None = None,
        *,
        clock: Clock | None = None,
        on_change: Callable[[ThrashVerdict], None] | None = None,
    ) -> None:
        self.config = config or ThrashConfig()
        self.clock = clock or SystemClock()
        self.on_change = on_change
        self._rules: dict[str, ThrashRules] = {}
        self._levels: dict[str, ThrashLevel] = {}
        self._plug: dict[str, tuple[bool, str]] = {}
        """Each node's plug as last read: (on, when it last switched)."""
        self.journal_tails: dict[str, deque[str]] = {}
        """The last kernel-journal lines followed per node (an incident bundle's
        testimony for a node that went dark)."""

    def rules(self, node: str) -> ThrashRules:
        r = self._rules.get(node)
        if r is None:
            r = self._rules[node] = ThrashRules(node, self.config)
        return r

    def on_snapshot(self, snap: NodeSnapshot) -> ThrashVerdict:
        if snap.state is NodeState.POWERED_OFF or self._cycled_unseen(snap):
            before = self._rules.pop(snap.node, None)  # a power cycle starts a fresh history
            self.rules(snap.node).power_cycled(  # its grace on the node's clock
                snap.taken_at, before.node_rate() if before is not None else None)
        sample = sample_of(snap)
        if sample is not None:
            self.rules(snap.node).add_sample(sample)
        return self._judge(snap.node, max(snap.taken_at, self.clock.time()))

    def _cycled_unseen(self, snap: NodeSnapshot) -> bool:
        """The plug was on at the last reading and is on now, but switched in
        between, and the node does not answer: it was cycled between two polls
        and is booting. A plug that went unavailable and back also moves its
        ``last_changed``, so a node that answers was not cycled (one that was,
        and has booted, shows it by its uptime)."""
        before = self._plug.get(snap.node)
        if snap.powered is not None and snap.plug_changed:
            self._plug[snap.node] = (snap.powered, snap.plug_changed)
        return (before is not None and before[0] and snap.powered is True
                and before[1] != snap.plug_changed != "" and snap.probe is None)

    def on_line(self, node: str, line: str) -> LogEvent | None:
        """A kernel-journal line of ``node`` or an engine line of a rank on it."""
        ev = classify(line)
        if ev is not None:
            self.on_event(node, ev)
        return ev

    def on_event(self, node: str, ev: LogEvent) -> None:
        self.rules(node).add_event(self.clock.time(), ev)

    def on_engine_stall(self, node: str, text: str) -> None:
        """Throughput collapse of a lane with a rank on ``node`` (watch/canary.py)."""
        self.rules(node).add_engine_stall(self.clock.time(), text)

    def verdict(self, node: str) -> ThrashVerdict:
        return self.rules(node).verdict(self.clock.time())

    def verdicts(self) -> dict[str, ThrashVerdict]:
        return {node: self.verdict(node) for node in self._rules}

    def _judge(self, node: str, now: float) -> ThrashVerdict:
        v = self.rules(node).verdict(now)
        if self._levels.get(node, ThrashLevel.OK) is not v.level:
            self._levels[node] = v.level
            if self.on_change is not None:
                self.on_change(v)
        return v

    async def follow_journal(self, node: str, link: StreamSource) -> None:
        """Feed ``node``'s kernel journal until cancelled (the caller owns the
        task). A node that stops answering is retried with backoff."""
        follower = LogFollower.for_journal(link, node, clock=self.clock)
        tail = self.journal_tails.setdefault(node, deque(maxlen=JOURNAL_TAIL_LINES))
        async for batch in follower.batches():
            for line in batch:
                self.on_line(node, line.text)
                tail.append(line.raw)

    async def follow_journals(self, links: Mapping[str, StreamSource]) -> None:
        """All nodes' journals; cancelling this cancels every follower."""
        tasks = [asyncio.create_task(self.follow_journal(n, link), name=f"journal-{n}")
                 for n, link in links.items()]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def assess_nodes(
    snapshots: Iterable[NodeSnapshot],
    config: ThrashConfig | None = None,
    *,
    now: float,
    lines: Mapping[str, Iterable[str]] | None = None,
) -> dict[str, ThrashVerdict]:
    """One-shot verdicts (for ``sparktui health``): each node's level and
    evidence from its latest snapshot (history of several snapshots per
    node is used when given, oldest first) and any journal/engine lines."""
    detector = ThrashDetector(config, clock=_Fixed(now))
    for node, node_lines in (lines or {}).items():
        for line in node_lines:
            detector.on_line(node, line)
    for snap in snapshots:
        detector.on_snapshot(snap)
    return detector.verdicts()


def node_verdict(snap: NodeSnapshot, config: ThrashConfig | None = None) -> ThrashVerdict:
    """The thrash verdict of one node from one snapshot (a `health` column).

    Without history a starved node is at most *suspected* unless its
    snapshot alone shows memory exhausted; the console's live detector,
    which has the history and the journal, is the one that says *thrash*.
    """
    return assess_nodes([snap], config, now=snap.taken_at)[snap.node]


class _Fixed:
    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
