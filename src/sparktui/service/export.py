"""The fleet as Prometheus metrics: what the sentinel knows (node state,
memory, thrash level, lane phase, the canary, alerts, workflows) in the
monitoring stack operators already run, so history, dashboards and alert
routing live there (gpustack/gpustack#3323; llm-d/llm-d#553).

`FleetMetrics` is a prometheus_client collector: it keeps the latest service
event of each node and lane and renders them at scrape time, so a sample's age
is computed when Prometheus asks, not when the node last answered. Every label
value comes from the config (node names), from the code (states, severities)
or from a bounded set (lanes named by the recipes; at most `MAX_KINDS`
workflow kinds): a scrape never grows without bound. Workflow runs are counted
from the journal, which every process that acts on the cluster writes (the
consoles, the CLI), so the count is the same whichever process ran them and
survives a sentinel restart. The HTTP side is adapters/exposition.py.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from sparktui.core.clock import Clock
from sparktui.core.config import Config
from sparktui.core.state import NodeState
from sparktui.ops.journal import JOURNAL_FILE, Entry
from sparktui.ops.journal_tail import JournalTail
from sparktui.service.alerts import ALERT_LEVELS
from sparktui.service.events import (
    AlertCleared,
    AlertRaised,
    LaneChanged,
    LaneGone,
    NodeSampled,
    ServiceEvent,
)
from sparktui.service.lanes import LANE_STATES, LaneView

KIB = 1024
MAX_KINDS = 32
"""Distinct workflow kinds counted by name; more (a foreign journal) are ``other``."""
_KIND = re.compile(r"[a-z][a-z0-9-]{0,31}")


def label(value: str) -> str:
    """``loading weights`` -> ``loading_weights``: label values a PromQL
    reader can type without quoting spaces."""
    return re.sub(r"[^a-z0-9]+", "_", value.lower()).strip("_")


@dataclass
class _WorkflowTally:
    """``end`` entries of the journal by (kind, outcome): a reader of the one
    journal reader (ops/journal_tail.py), told every entry from the file's start."""

    refused: set[str] = field(default_factory=set)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def reset(self, replaced: bool) -> None:
        """Replaced or cut: the journal is told again from its start."""
        self.counts.clear()
        self.refused.clear()

    def entry(self, seq: int, entry: Entry) -> None:
        if entry.kind == "refused":
            self.refused.add(entry.wf)
            return
        if entry.kind != "end":
            return
        kind = entry.workflow if _KIND.fullmatch(entry.workflow) else "other"
        if kind != "other" and kind not in {k for k, _ in self.counts} \
                and len({k for k, _ in self.counts}) >= MAX_KINDS:
            kind = "other"
        outcome = "ok" if entry.ok else ("refused" if entry.wf in self.refused else "failed")
        self.refused.discard(entry.wf)
        self.counts[(kind, outcome)] = self.counts.get((kind, outcome), 0) + 1


class FleetMetrics(Collector):
    """The sentinel's view as metric families; feed it every service event."""

    def __init__(self, config: Config, clock: Clock, lanes: Collection[str]) -> None:
        """``lanes``: the lane names that may appear as labels (the recipes)."""
        self.config = config
        self.clock = clock
        self.allowed_lanes = frozenset(lanes)
        self._nodes: dict[str, NodeSampled] = {}
        self._lanes: dict[str, LaneView] = {}
        self._alerts: dict[str, str] = {}
        self._tally = _WorkflowTally()
        self._journal = JournalTail(config.state_dir() / JOURNAL_FILE)
        """Its own tail: it counts from the file's start, where the service's
        readers begin from when they subscribed."""
        self._journal.subscribe(self._tally)

    def registry(self) -> CollectorRegistry:
        """A registry holding only this collector (no process or GC series
        of the sentinel itself: they say nothing about the fleet)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return registry

    def observe(self, event: ServiceEvent) -> None:
        if isinstance(event, NodeSampled):
            if event.snapshot.node in self.config.nodes:
                self._nodes[event.snapshot.node] = event
        elif isinstance(event, LaneChanged):
            if event.lane.name in self.allowed_lanes:
                self._lanes[event.lane.name] = event.lane
        elif isinstance(event, LaneGone):
            self._lanes.pop(event.name, None)
        elif isinstance(event, AlertRaised):
            self._alerts[event.alert.key] = event.alert.level
        elif isinstance(event, AlertCleared):
            self._alerts.pop(event.key, None)

    def collect(self) -> Iterator[Metric]:
        yield from self._node_families()
        yield from self._lane_families()
        alerts = GaugeMetricFamily("sparktui_alerts_active",
                                   "Alerts raised and not cleared, by severity",
                                   labels=["severity"])
        counts = dict.fromkeys((label(s) for s in ALERT_LEVELS), 0) | {"other": 0}
        for level in self._alerts.values():
            key = label(level)
            counts[key if key in counts else "other"] += 1
        for severity, n in counts.items():
            alerts.add_metric([severity], n)
        yield alerts
        self._journal.read()
        runs = CounterMetricFamily("sparktui_workflow_runs",
                                   "Workflows that ended, from the journal, by kind and outcome",
                                   labels=["workflow", "outcome"])
        for (kind, outcome), n in sorted(self._tally.counts.items()):
            runs.add_metric([kind, outcome], n)
        yield runs

    def _node_families(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("sparktui_node_up",
                               "1 when the node's SSH probe answered at the last poll",
                               labels=["node"])
        state = GaugeMetricFamily("sparktui_node_state",
                                  "The node's state, one-hot (online, starved, unreachable, "
                                  "powered_off; unknown: the probe failed in a way that says "
                                  "nothing of the node, a host key or login refused)",
                                  labels=["node", "state"])
        mem = GaugeMetricFamily("sparktui_node_mem_available_bytes",
                                "MemAvailable at the last good probe (GB10: the only "
                                "memory figure that holds)", labels=["node"])
        psi = GaugeMetricFamily("sparktui_node_psi_full_avg10",
                                "Memory PSI full avg10, percent of time all tasks stalled",
                                labels=["node"])
        thrash = GaugeMetricFamily("sparktui_node_thrash_level",
                                   "0 ok, 1 pressure, 2 thrash suspected, 3 thrash",
                                   labels=["node"])
        age = GaugeMetricFamily("sparktui_node_sample_age_seconds",
                                "Seconds since the node's probe last came back",
                                labels=["node"])
        now = self.clock.time()
        for name in self.config.nodes:
            sampled = self._nodes.get(name)
            if sampled is None:
                continue  # not polled yet: no series rather than a made-up value
            snap = sampled.snapshot
            up.add_metric([name], 1.0 if snap.online else 0.0)
            for s in NodeState:
                state.add_metric([name, s.value], 1.0 if snap.state is s else 0.0)
            point = sampled.last_point
            if point is not None and point.mem_available_kib is not None:
                mem.add_metric([name], point.mem_available_kib * KIB)
            if point is not None and point.psi_full_avg10 is not None:
                psi.add_metric([name], point.psi_full_avg10)
            if sampled.verdict is not None:
                thrash.add_metric([name], int(sampled.verdict.level))
            if snap.last_ok_at is not None:
                age.add_metric([name], max(0.0, now - snap.last_ok_at))
        yield from (up, state, mem, psi, thrash, age)

    def _lane_families(self) -> Iterator[Metric]:
        state = GaugeMetricFamily("sparktui_lane_state", "The lane's phase, one-hot",
                                  labels=["lane", "state"])
        decode = GaugeMetricFamily("sparktui_lane_decode_tokens_per_second",
                                   "Decode throughput from the engine's /metrics",
                                   labels=["lane"])
        canary = GaugeMetricFamily("sparktui_lane_canary_seconds",
                                   "Time to the first token of the last canary completion",
                                   labels=["lane"])
        qualified = GaugeMetricFamily("sparktui_lane_qualified",
                                      "1 when the quality gate's last verdict is qualified",
                                      labels=["lane"])
        for name, view in sorted(self._lanes.items()):
            for s in LANE_STATES:
                state.add_metric([name, label(s)], 1.0 if view.phase == s else 0.0)
            if view.decode_tps is not None:
                decode.add_metric([name], view.decode_tps)
            if view.canary_s is not None:
                canary.add_metric([name], view.canary_s)
            qualified.add_metric([name], 1.0 if view.gate == "qualified" else 0.0)
        yield from (state, decode, canary, qualified)
