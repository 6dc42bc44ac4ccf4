"""An incident as a bundle tells it, pure: the first fatal line and its rank,
the kernel's pressure lines, the nodes' state changes, a timeline, the next
step, and the rules that keep a bundle small and free of secrets.

`ops/bundle.py` collects the parts (over SSH, from the journal, from what the
console holds) and writes the tarball; everything that decides what the
parts *say* lives here so it can be tested without a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from sparktui.core.advice import fatal_next_step
from sparktui.core.failure import Failure
from sparktui.core.logsig import Kind, classify, parse_timestamp, split_timestamp
from sparktui.core.phases import PhaseTracker
from sparktui.core.redact import MASK, redact
from sparktui.core.state import KIB_PER_GIB, NodeSnapshot

KERNEL_KINDS = frozenset({Kind.KERNEL_PRESSURE, Kind.KERNEL_NVRM_NOMEM, Kind.KERNEL_OOM_KILL})
TIMELINE_MAX = 80
"""Timeline entries in SUMMARY.md; the full story is in the parts beside it."""


@dataclass(frozen=True)
class SnapshotRow:
    """One poll of a node as a bundle keeps it (MemAvailable, PSI, load, state)."""

    t: float
    node: str
    state: str
    mem_available_gib: float | None = None
    mem_total_gib: float | None = None
    psi_some_avg10: float | None = None
    psi_full_avg10: float | None = None
    load1: float | None = None
    level: str = ""
    """The thrash detector's level at that poll (``ok``, ``pressure`` ...)."""
    error: str = ""

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


def snapshot_row(snap: NodeSnapshot, level: str = "") -> SnapshotRow:
    probe = snap.probe
    mem = probe.meminfo if probe else None
    psi = probe.psi if probe else None
    load = probe.loadavg if probe else None
    return SnapshotRow(
        t=snap.taken_at, node=snap.node, state=snap.state.value,
        mem_available_gib=round(mem.available_kib / KIB_PER_GIB, 2) if mem else None,
        mem_total_gib=round(mem.total_kib / KIB_PER_GIB, 2) if mem else None,
        psi_some_avg10=psi.some.avg10 if psi else None,
        psi_full_avg10=psi.full.avg10 if psi and psi.full else None,
        load1=load.one if load else None, level=level, error=snap.error[:200])


@dataclass(frozen=True)
class HeldAlert:
    t: float
    key: str
    level: str
    subject: str
    evidence: tuple[str, ...]
    next_step: str
    count: int = 1
    """Times it was raised with this evidence (a bundle lists a repeat once)."""
    last_t: float | None = None
    """When the last of those repeats was raised."""


REPEAT_GAP_S = 600.0
"""Raises of one alert key no further apart than this are one incident (an
alert raised again as its evidence grows, or the phone told): the default
window reaches back to the first of them, not to the last repeat."""


def dedupe_alerts(alerts: Iterable[HeldAlert]) -> list[HeldAlert]:
    """One entry per (key, level, evidence), at its first time, with the count
    and the time of the last repeat: an alert re-raised 224 times reads once."""
    out: dict[tuple[str, str, tuple[str, ...]], HeldAlert] = {}
    for a in alerts:
        k = (a.key, a.level, a.evidence)
        first = out.get(k)
        out[k] = a if first is None else replace(first, count=first.count + a.count,
                                                   last_t=a.last_t or a.t)
    return sorted(out.values(), key=lambda a: a.t)


def incident_starts(alerts: Sequence[HeldAlert]) -> list[float]:
    """When each incident began: the first raise of each run of one key's
    raises, each within REPEAT_GAP_S of the one before."""
    out = []
    last: dict[str, float] = {}
    for a in sorted(alerts, key=lambda a: a.t):
        if a.key not in last or a.t - last[a.key] > REPEAT_GAP_S:
            out.append(a.t)
        last[a.key] = max(a.last_t or a.t, a.t)
    return out


@dataclass
class Held:
    """What the console holds of the night: for a node that went dark, the only
    testimony there is (its last snapshots, the lines followed before)."""

    logs: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    """lane -> rank -> raw log lines (docker timestamp first), oldest first."""
    lane_nodes: dict[str, dict[int, str]] = field(default_factory=dict)
    """lane -> rank -> node, as last seen."""
    lane_cluster: dict[str, str] = field(default_factory=dict)
    kernel: dict[str, list[str]] = field(default_factory=dict)
    """node -> kernel-journal lines followed (short-iso-precise)."""
    snapshots: dict[str, list[SnapshotRow]] = field(default_factory=dict)
    alerts: list[HeldAlert] = field(default_factory=list)
    guards: list[dict[str, object]] = field(default_factory=list)
    """Guard verdicts as workflows reported them (``wf``, ``t``, passed, refused ...)."""


@dataclass(frozen=True)
class KernelFinding:
    t: float | None
    node: str
    kind: Kind
    line: str


NODES = "nodes"
"""A time the nodes stamped: docker's and the engine's log stamps, the kernel journal."""
OURS = "ours"
"""A time the bundling process stamped on its own clock: journal, polls, alerts."""


@dataclass(frozen=True)
class Clocks:
    """Which clocks a bundle's times are on, so that no line of its timeline
    sits between two on another clock (issue 25: a CLI bundle on wall time
    interleaved a 60x simulator's log stamps, days apart)."""

    ours: str
    """This process's clock, in words (``wall clock (UTC)``, ``simulated clock``)."""
    shared: bool
    """The nodes stamp on the same clock (production: NTP; the demo: the console
    runs on its simulator's clock). When not, the nodes' times are never
    compared with ours: two timelines, each on one clock."""


@dataclass(frozen=True)
class TimelineItem:
    t: float
    what: str
    clock: str = OURS
    """:data:`NODES` or :data:`OURS`: who stamped ``t``."""


def line_time(line: str) -> float | None:
    return parse_timestamp(split_timestamp(line)[0])


def first_fatal(rank_lines: Mapping[int, Sequence[str]]) -> Failure | None:
    """The lane's first fatal line by the nodes' clocks, through the same
    tracker the console and `serve` use (a worker's root cause, not rank 0's
    "worker died" that it caused)."""
    tracker = PhaseTracker("bundle", stall_after_s=float("inf"), start=0.0)
    merged = sorted(
        ((line_time(line) or 0.0, rank, i, line)
         for rank, lines in rank_lines.items() for i, line in enumerate(lines)),
        key=lambda x: (x[0], x[1], x[2]))
    for _, rank, _, line in merged:
        tracker.feed(rank, line, 0.0)
    return tracker.failure


def kernel_findings(node: str, lines: Iterable[str]) -> list[KernelFinding]:
    """OOM-killer, NVRM NoMemory and journald pressure lines, in order."""
    out = []
    for line in lines:
        ts, body = split_timestamp(line)
        ev = classify(body)
        if ev is not None and ev.kind in KERNEL_KINDS:
            out.append(KernelFinding(parse_timestamp(ts), node, ev.kind, body.strip()))
    return out


def state_changes(rows: Sequence[SnapshotRow]) -> list[TimelineItem]:
    out: list[TimelineItem] = []
    last: tuple[str, str] | None = None
    for r in rows:
        now = (r.state, r.level)
        if now != last:
            mem = f", MemAvailable {r.mem_available_gib:g} GiB" \
                if r.mem_available_gib is not None else ""
            psi = f", PSI full {r.psi_full_avg10:g}" if r.psi_full_avg10 is not None else ""
            level = f" (thrash level {r.level})" if r.level and r.level != "ok" else ""
            out.append(TimelineItem(r.t, f"{r.node}: {r.state}{level}{mem}{psi}"))
            last = now
    return out


@dataclass(frozen=True)
class Incident:
    subject: str
    kind: str
    """``lane`` or ``node``."""
    reason: str
    """Why the bundle was written (``manual``, an alert's words)."""
    since: float
    until: float
    failure: Failure | None
    failure_node: str | None
    findings: tuple[KernelFinding, ...]
    alerts: tuple[HeldAlert, ...]
    dark: tuple[str, ...]
    """Nodes that did not answer the collection."""
    missing: tuple[str, ...]
    """What could not be collected, one sentence each."""
    timeline: tuple[TimelineItem, ...]
    clocks: Clocks

    @property
    def next_steps(self) -> list[str]:
        steps: list[str] = []
        if self.failure is not None:
            steps.append(fatal_next_step(self.failure.why, self.failure.rank))
        for a in self.alerts:
            if a.next_step and a.next_step not in steps:
                steps.append(a.next_step)
        for node in self.dark:
            step = f"{node} does not answer: `sparktui recover {node}` (plug-cycle)"
            if step not in steps:
                steps.append(step)
        return steps or ["nothing fatal found in the window: read the rank logs beside this file"]


def build_timeline(clocks: Clocks, *parts: Iterable[TimelineItem]) -> tuple[TimelineItem, ...]:
    """The items in time order, at most TIMELINE_MAX per clock: one order when
    the nodes stamp on our clock, else our items, then the nodes', each in
    its own clock's order."""
    every = [i for p in parts for i in p]
    groups = [every] if clocks.shared else [[i for i in every if i.clock == c]
                                            for c in (OURS, NODES)]
    out: list[TimelineItem] = []
    for group in groups:
        items = sorted(group, key=lambda i: i.t)
        if len(items) > TIMELINE_MAX:
            half = TIMELINE_MAX // 2
            cut = len(items) - TIMELINE_MAX
            items = [*items[:half], TimelineItem(items[half].t, f"... {cut} entries left out "
                                                                f"(see the parts)",
                                                 items[half].clock),
                     *items[-half:]]
        out += items
    return tuple(out)


def findings_timeline(findings: Sequence[KernelFinding]) -> list[TimelineItem]:
    """The first line of each kind per node, with how many followed."""
    seen: dict[tuple[str, Kind], tuple[KernelFinding, int]] = {}
    for f in findings:
        key = (f.node, f.kind)
        first, n = seen.get(key, (f, 0))
        seen[key] = (first, n + 1)
    out = []
    for (node, _), (f, n) in seen.items():
        if f.t is not None:
            more = f" (+{n - 1} more)" if n > 1 else ""
            out.append(TimelineItem(f.t, f"{node} kernel: {f.line[:160]}{more}", NODES))
    return out


def timeline_sections(items: Sequence[TimelineItem], clocks: Clocks) -> list[str]:
    """SUMMARY.md's timeline: one, when the nodes stamp on our clock; else one
    per clock, each saying which (their times are never put side by side)."""
    def lines(part: Sequence[TimelineItem]) -> list[str]:
        return [f"- {hhmmss(i.t)[11:19]} {i.what}" for i in part] or ["- (nothing timed)"]

    if clocks.shared:
        return ["", f"## Timeline ({clocks.ours}; the nodes' stamps are on it too)", "",
                *lines(items)]
    return ["", f"## Timeline on {clocks.ours}: journal, polls, alerts", "",
            *lines([i for i in items if i.clock == OURS]),
            "", "## Timeline on the nodes' clocks: log and kernel stamps (another clock: "
                "not comparable with the one above)", "",
            *lines([i for i in items if i.clock == NODES])]


def hhmmss(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def render_summary(inc: Incident) -> str:
    """SUMMARY.md: what happened, first fatal line and rank, timeline, next step."""
    ours = inc.clocks.ours
    out = [f"# Incident: {inc.kind} {inc.subject}", "",
           f"- window: {hhmmss(inc.since)} .. {hhmmss(inc.until)} ({ours})",
           f"- written because: {inc.reason}", ""]
    out += ["## What happened", ""]
    if inc.failure is not None:
        f = inc.failure
        where = f" on {inc.failure_node}" if inc.failure_node else ""
        out.append(f"The lane failed on **rank {f.rank}**{where} ({f.kind.value}).")
    for a in inc.alerts:
        again = (f" (raised {a.count} times, last at {hhmmss(a.last_t or a.t)})"
                 if a.count > 1 else "")
        out.append(f"- alert **{a.level}** {a.subject} at {hhmmss(a.t)}{again}: "
                   f"{a.evidence[0] if a.evidence else ''}")
    counts: dict[tuple[str, Kind], int] = {}
    for k in inc.findings:
        counts[(k.node, k.kind)] = counts.get((k.node, k.kind), 0) + 1
    for (node, kind), n in sorted(counts.items()):
        out.append(f"- {node}: {n} kernel line(s) of kind {kind.value}")
    if inc.dark:
        out.append(f"- did not answer while this bundle was collected: {', '.join(inc.dark)}")
    if inc.failure is None and not inc.alerts and not counts:
        out.append("No fatal line, alert or kernel pressure line in the window.")
    out += ["", "## First fatal line", ""]
    if inc.failure is not None:
        f = inc.failure
        out += [f"rank {f.rank}" + (f" ({inc.failure_node})" if inc.failure_node else "")
                + (f" at {f.timestamp}" if f.timestamp else "") + ":", "", "```", f.line, "```"]
        if f.cause:
            out += ["", f"cause: `{f.cause}`"]
        if f.context:
            out += ["", "lines before it:", "", "```", *f.context[-5:], "```"]
    else:
        out.append("none found in the ranks' logs")
    out += timeline_sections(inc.timeline, inc.clocks)
    out += ["", "## Next step", ""]
    out += [f"{n}. {s}" for n, s in enumerate(inc.next_steps, 1)]
    out += ["", "## Not collected", ""]
    out += [f"- {m}" for m in inc.missing] or ["- everything listed was collected"]
    stamp = f"`t` on {inc.clocks.ours}"
    out += ["", "## Parts", "",
            "- `ranks/`: last lines of every rank with timestamps (the nodes' clocks)",
            "- `kernel/`: each node's kernel journal (OOM killer, NVRM, journald pressure; "
            "the nodes' clocks)",
            f"- `snapshots/`: the nodes' polls (MemAvailable, PSI, load, state) in the window "
            f"({stamp})",
            "- `plan.json`: the plan and the guard verdicts that started the lane",
            "- `recipe/`, `config/`, `hashes.txt`: the recipe and config (no token), sha256",
            "- `commands.sh`: the rendered commands",
            "- `journal.jsonl`: the journal entries (`t` on the clock of the process that "
            "ran each workflow: `\"clock\": \"simulated\"` a simulator's, none the wall's; "
            "the timeline holds those on its clocks only)",
            f"- `alerts.jsonl`: the alerts the console raised ({stamp})", ""]
    return "\n".join(out)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """core/redact.py's redaction, plus token values this process never loaded
    (the environment's token while the simulator's was used)."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, MASK)
    return redact(text)


def bound_members(members: Mapping[str, bytes], *, member_cap: int,
                  total_cap: int) -> tuple[dict[str, bytes], list[str]]:
    """Each part at most ``member_cap`` bytes and all together at most
    ``total_cap``: the oldest lines go first (a log's end is the news).
    Returns the parts and what was cut."""
    out = dict(members)
    notes: list[str] = []

    def cut(name: str, keep: int) -> None:
        data = out[name]
        if len(data) <= keep:
            return
        tail = data[len(data) - keep:]
        nl = tail.find(b"\n")
        if 0 <= nl < len(tail) - 1:
            tail = tail[nl + 1:]
        dropped = len(data) - len(tail)
        out[name] = f"[... {dropped} bytes cut: size bound]\n".encode() + tail
        notes.append(f"{name}: the oldest {dropped} bytes were cut (size bound)")

    names = list(out)
    for name in names:
        cut(name, member_cap)
    while sum(len(v) for v in out.values()) > total_cap:
        biggest = max(names, key=lambda n: len(out[n]))
        if len(out[biggest]) <= 1024:
            break
        cut(biggest, len(out[biggest]) // 2)
    return out, notes
