"""`sparktui health`: one poll round of every node (or one cluster), as a table
or JSON, and a one-line summary like the seed's "8/8 online, all free".

What is wrong with a node is core/nodehealth's answer, the serve guards'
own; beyond the nodes it shows what the guards know of the fleet
(ops/health.py): a blocking shared switch that is off, nodes sharing one SSH
host key, run locks, unfinished workflows. Exit 0 when nothing would refuse a
serve (warnings such as a shared host key are shown but pass), 1 when
something would, 2 when the nodes cannot be resolved (bad config, simulator
not running).

Columns are data (`Column`); the thrash level (with its evidence and the
runbook's next step) is one of them and shows in the table and the JSON
alike. Plug state comes from Home Assistant when its token is available, so a
node switched off shows as powered off rather than unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from ..adapters.endpoints import EndpointError
from ..core import nodehealth
from ..core.canary import describe_age, stale_age
from ..core.config import Config
from ..core.config_load import load_config
from ..core.errors import InputError, Problem
from ..core.nodehealth import Finding
from ..core.state import KIB_PER_GIB, ClusterSnapshot, NodeSnapshot, NodeState
from ..core.thrash import ThrashLevel, ThrashVerdict
from ..ops import sentinel_state
from ..ops.context import open_runtime
from ..ops.health import fleet_findings, health_needs
from ..ops.observe import observe
from ..watch.thrash import node_verdict
from .common import console, print_json

STATE_STYLE = {
    NodeState.ONLINE: "green",
    NodeState.STARVED: "bold red",
    NodeState.UNREACHABLE: "red",
    NodeState.POWERED_OFF: "dim",
    NodeState.UNKNOWN: "yellow",
}


@dataclass(frozen=True)
class Column:
    """One column of the health table; ``value`` is also the JSON field ``key``."""

    header: str
    key: str
    value: Callable[[NodeSnapshot], object]
    text: Callable[[NodeSnapshot], Text | str]
    justify: str = "left"
    no_wrap: bool = False
    min_width: int | None = None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "health",
        help="poll every node once and show its state",
        description="Poll every node (or one cluster) once: state, kernel vs pin, memory, "
        "PSI, containers, free/busy, and what the guards know of the fleet (blocking "
        "switches, shared host keys, run locks, unfinished workflows). Exit 0 when nothing "
        "would refuse a serve, 1 when something would, 2 when the nodes cannot be reached "
        "through the config.",
    )
    p.add_argument("--cluster", help="only the nodes of this cluster")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    names = _node_names(config, args.cluster)
    try:
        cluster, fleet = asyncio.run(poll_once(config, names))
    except EndpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = HealthReport(config, cluster, fleet=fleet)
    if args.json:
        print_json(report.as_json())
    else:
        out = console()
        out.print(report.table())
        out.print(report.summary())
    return 0 if report.healthy else 1


def _node_names(config: Config, cluster: str | None) -> list[str]:
    if cluster is None:
        return list(config.nodes)
    if cluster not in config.clusters:
        raise InputError(
            [
                Problem(
                    config.path,
                    None,
                    "--cluster",
                    f"unknown cluster {cluster!r} (known: {', '.join(config.clusters)})",
                )
            ]
        )
    return list(config.clusters[cluster].nodes)


async def poll_once(config: Config, names: list[str]) -> tuple[ClusterSnapshot,
                                                                list[Finding]]:
    """One observation of ``names`` (a probe round, the blocking switches, the host
    keys, locks and journal) over fresh connections; the nodes' snapshot and what
    is wrong around them."""
    async with open_runtime(config) as rt:
        if rt.power is None:
            print(f"note: plug state unknown ({rt.ops.power_error})", file=sys.stderr)
        state = await observe(rt.ops, health_needs(config, names))
    return state.snapshot, fleet_findings(state, names)


# -- columns -------------------------------------------------------------------


def _gib(kib: int | None) -> float | None:
    return round(kib / KIB_PER_GIB, 1) if kib is not None else None


def _mem_text(snap: NodeSnapshot) -> str:
    mem = snap.probe.meminfo if snap.probe else None
    return f"{mem.used_gib:.1f}/{mem.available_gib:.1f}" if mem else "-"


def _psi_full(snap: NodeSnapshot) -> float | None:
    psi = snap.probe.psi if snap.probe else None
    return psi.full.avg10 if psi and psi.full else None


def _containers(snap: NodeSnapshot) -> list[dict[str, object]]:
    if snap.probe is None:
        return []
    return [
        {"name": c.name, "image": c.image, "state": c.state, "status": c.status, "lane": c.lane}
        for c in snap.probe.containers
    ]


def _containers_text(snap: NodeSnapshot) -> str:
    if snap.probe is None:
        return "-"
    running = [c.name for c in snap.probe.running_containers]
    stopped = len(snap.probe.containers) - len(running)
    parts = running + ([f"+{stopped} stopped"] if stopped else [])
    return ", ".join(parts) or "none"


def _busy(snap: NodeSnapshot) -> bool | None:
    return snap.probe.busy if snap.probe else None


THRASH_STYLE = {
    ThrashLevel.OK: "green",
    ThrashLevel.PRESSURE: "yellow",
    ThrashLevel.SUSPECTED: "bold red",
    ThrashLevel.THRASH: "bold white on red",
}


def columns(config: Config, verdicts: Mapping[str, ThrashVerdict]) -> list[Column]:
    """The table's columns; ``verdicts`` holds each node's thrash verdict."""

    def thrash_value(s: NodeSnapshot) -> dict[str, object]:
        v = verdicts[s.node]
        return {"level": v.level.label, "evidence": list(v.evidence), "next_step": v.next_step}

    def thrash_text(s: NodeSnapshot) -> Text:
        level = verdicts[s.node].level
        return Text(level.label, style=THRASH_STYLE[level])

    def state_text(s: NodeSnapshot) -> Text:
        return Text(s.state.value, style=STATE_STYLE[s.state])

    def kernel_text(s: NodeSnapshot) -> Text | str:
        kernel = s.probe.kernel if s.probe else None
        if kernel is None:
            return "-"
        bad = nodehealth.kernel(config, s.node, kernel) is not None
        return Text(kernel, style="red" if bad else "green")

    def psi_text(s: NodeSnapshot) -> str:
        full = _psi_full(s)
        return f"{full:.2f}" if full is not None else "-"

    def busy_text(s: NodeSnapshot) -> str:
        busy = _busy(s)
        return "-" if busy is None else ("busy" if busy else "free")

    return [
        Column("node", "node", lambda s: s.node, lambda s: s.node, no_wrap=True),
        Column("state", "state", lambda s: s.state.value, state_text, no_wrap=True),
        Column(
            "kernel",
            "kernel",
            lambda s: s.probe.kernel if s.probe else None,
            kernel_text,
            min_width=10,
        ),
        Column(
            "used/avail\nGiB",
            "mem",
            lambda s: (
                {
                    "total_gib": _gib(s.probe.meminfo.total_kib),
                    "used_gib": _gib(s.probe.meminfo.used_kib),
                    "available_gib": _gib(s.probe.meminfo.available_kib),
                }
                if s.probe and s.probe.meminfo
                else None
            ),
            _mem_text,
            "right",
            no_wrap=True,
        ),
        Column("PSI\nfull", "psi_full_avg10", _psi_full, psi_text, "right", no_wrap=True),
        Column("containers", "containers", _containers, _containers_text, min_width=7),
        Column("use", "busy", _busy, busy_text, no_wrap=True),
        Column("thrash", "thrash", thrash_value, thrash_text, min_width=6),
    ]


def last_good_ages(config: Config, cluster: ClusterSnapshot) -> dict[str, float]:
    """Nodes whose last good sample is older than two poll intervals: this
    run has no history, a running sentinel (ops/sentinel_state.py) has."""
    seen = sentinel_state.read(config.state_dir())
    out: dict[str, float] = {}
    for snap in cluster.nodes:
        last = snap.last_ok_at
        if last is None and seen is not None:
            last = seen.nodes.get(snap.node)
        age = stale_age(last, snap.taken_at, config.console.poll_interval_s)
        if age is not None:
            out[snap.node] = age
    return out


# -- the report ----------------------------------------------------------------


class HealthReport:
    def __init__(
        self, config: Config, cluster: ClusterSnapshot, cols: list[Column] | None = None,
        *, fleet: Sequence[Finding] = (),
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.verdicts = {s.node: node_verdict(s, config.thrash) for s in cluster.nodes}
        self.columns = cols if cols is not None else columns(config, self.verdicts)
        self.findings = {s.node: nodehealth.node_findings(config, s, s.node)
                         for s in cluster.nodes}
        self.issues = {n: [f.summary for f in fs] for n, fs in self.findings.items()}
        self.fleet = list(fleet)
        self.stale = last_good_ages(config, cluster)
        for node, age in self.stale.items():
            self.issues[node].append(describe_age(age) + " (sentinel)")

    @property
    def healthy(self) -> bool:
        """Nothing would refuse a serve (warnings pass)."""
        found = [f for fs in self.findings.values() for f in fs] + self.fleet
        return bool(self.cluster.nodes) and not any(f.blocks_serve for f in found)

    def summary(self) -> str:
        nodes = self.cluster.nodes
        online = [s for s in nodes if s.state is NodeState.ONLINE]
        head = f"{len(online)}/{len(nodes)} online"
        down = [s for s in nodes if s.state is not NodeState.ONLINE]
        if down:
            head += " (" + ", ".join(f"{s.node} {s.state.value}" for s in down) + ")"
        busy = [s for s in online if s.probe is not None and s.probe.busy]
        if not online:
            parts = [head]
        elif not busy:
            parts = [head, "all free" if len(online) == len(nodes) else "the online ones free"]
        else:
            parts = [head, f"{len(busy)} busy ({', '.join(s.node for s in busy)})"]
        nodes_by_issue: dict[str, list[str]] = {}
        for snap in online:
            for issue in self.issues[snap.node]:
                nodes_by_issue.setdefault(issue, []).append(snap.node)
        problems = [f"{', '.join(names)}: {issue}" for issue, names in nodes_by_issue.items()]
        for snap in nodes:
            verdict = self.verdicts[snap.node]
            if verdict.level >= ThrashLevel.PRESSURE:
                problems.append(f"{snap.node}: {verdict.level.label} "
                                f"({'; '.join(verdict.evidence)}) -> {verdict.next_step}")
        problems += [f"{f.subject}: {f.summary}" for f in self.fleet]
        return ", ".join(parts) + ("; " + "; ".join(problems) if problems else "")

    def table(self) -> Table:
        pin = self.config.guards.kernel_pin or "none"
        table = Table(
            title="sparktui health",
            title_justify="left",
            caption=f"kernel pin {pin}; memory as MemTotal - MemAvailable; PSI full avg10 %",
            caption_justify="left",
        )
        for col in self.columns:
            table.add_column(
                col.header,
                justify=col.justify,  # type: ignore[arg-type]
                no_wrap=col.no_wrap,
                min_width=col.min_width,
                overflow="fold",
            )
        table.add_column("issues", min_width=8, overflow="fold")
        for snap in self.cluster.nodes:
            issues = self.issues[snap.node]
            table.add_row(
                *(col.text(snap) for col in self.columns),
                Text("; ".join(issues), style="red") if issues else Text("ok", style="green"),
            )
        return table

    def as_json(self) -> dict[str, object]:
        return {
            "ok": self.healthy,
            "summary": self.summary(),
            "taken_at": self.cluster.taken_at,
            "fleet": [f.to_json() for f in self.fleet],
            "nodes": [
                {
                    **{col.key: col.value(snap) for col in self.columns},
                    "issues": self.issues[snap.node],
                    "findings": [f.to_json() for f in self.findings[snap.node]],
                    "last_good_age_s": self.stale.get(snap.node),
                    "error": snap.error,
                    "liveness": snap.liveness,
                    "probe_latency_s": snap.probe_latency_s,
                    "problems": list(snap.probe.problems) if snap.probe else [],
                }
                for snap in self.cluster.nodes
            ],
        }
