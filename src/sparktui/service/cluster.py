"""`ClusterService`: starts and owns the fleet, the poller, the thrash
detector, the journal followers and one watch per lane, and reports what
they learn to one sink. The console calls it; it never calls the console.

Every task it starts is cancelled by `stop()`; every network wait below it
has a timeout (the adapters and watchers enforce theirs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Protocol

from sparktui.adapters.endpoints import Endpoints, resolve_endpoints
from sparktui.adapters.ping import LivenessCheck, check_liveness
from sparktui.adapters.ssh import Fleet
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config
from sparktui.core.errors import Problem
from sparktui.core.recipe import Recipe
from sparktui.core.recipe_load import load_all_recipes
from sparktui.core.state import ClusterSnapshot, HistoryPoint, NodeSnapshot
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.service import actions
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    LaneGone,
    NodeSampled,
    ServiceEvent,
    Sink,
)
from sparktui.service.lane_watch import EngineProbe, LaneWatch, engine_probe_for
from sparktui.service.lanes import LaneView, discover_lanes, lane_cluster, lane_uptime
from sparktui.watch.follower import LogLine
from sparktui.watch.poller import Poller, PowerSource
from sparktui.watch.readiness import NodeLink
from sparktui.watch.thrash import ThrashDetector

log = logging.getLogger(__name__)


class NodeLinks(Protocol):
    """What the service needs of `adapters.ssh.Fleet`: one link per node that
    can probe, run and stream."""

    def get(self, name: str) -> NodeLink: ...


class WorkflowUnavailable(RuntimeError):
    """The ops workflow for an action is not in this build."""


class ClusterService:
    def __init__(
        self,
        config: Config,
        *,
        links: NodeLinks | None = None,
        endpoints: Endpoints | None = None,
        clock: Clock | None = None,
        liveness: LivenessCheck = check_liveness,
        power: PowerSource | None = None,
        engine_probe: EngineProbe | None = None,
        recipes: Mapping[str, Recipe] | None = None,
        follow_journals: bool = True,
    ) -> None:
        """Everything that does I/O can be injected (tests, benchmarks); by
        default the endpoints come from the config (or the running simulator)
        and the links are an SSH `Fleet`, both made by `start()`."""
        self.config = config
        self.clock = clock or SystemClock()
        self._links = links
        self._endpoints = endpoints
        self._liveness = liveness
        self._power = power
        self._engine_probe = engine_probe
        self._follow_journals = follow_journals
        self.recipe_problems: list[Problem] = []
        if recipes is None:
            loaded, self.recipe_problems = load_all_recipes(config)
            recipes = loaded
        self.recipes: dict[str, Recipe] = dict(recipes)
        self.detector = ThrashDetector(config.thrash, clock=self.clock)
        self.poller: Poller | None = None
        self._fleet: Fleet | None = None
        self._sink: Sink = _drop
        self._tasks: list[asyncio.Task[None]] = []
        self._lanes: dict[str, LaneWatch] = {}
        self._alerts: dict[str, Alert] = {}

    # -- lifecycle -----------------------------------------------------------

    async def start(self, sink: Sink) -> None:
        """Connect and start watching; events go to ``sink`` from now on.
        Raises `EndpointError` when the endpoints cannot be resolved."""
        self._sink = sink
        if self._endpoints is None:
            self._endpoints = resolve_endpoints(self.config)
        if self._links is None:
            self._fleet = Fleet.from_config(self.config, self._endpoints, clock=self.clock)
            self._links = self._fleet
        if self._engine_probe is None:
            endpoints = self._endpoints
            self._engine_probe = engine_probe_for(lambda n: endpoints.node(n).api_host)
        self.poller = Poller(self.config, self._links, self._endpoints, clock=self.clock,
                             liveness=self._liveness, power=self._power)
        queue = self.poller.subscribe()
        self.poller.start()
        self._tasks.append(asyncio.create_task(self._consume(queue), name="service:snapshots"))
        if self._follow_journals:
            links = {n: self._links.get(n) for n in self.config.nodes}
            self._tasks.append(asyncio.create_task(self.detector.follow_journals(links),
                                                   name="service:journals"))

    async def stop(self) -> None:
        """Cancel every task this service started and close the connections."""
        if self.poller is not None:
            await self.poller.stop()
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        lanes, self._lanes = list(self._lanes.values()), {}
        await asyncio.gather(*(w.stop() for w in lanes), return_exceptions=True)
        if self._fleet is not None:
            await self._fleet.close()
            self._fleet = None

    # -- reading -------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        if self.poller is None:
            return ClusterSnapshot(self.clock.time(), ())
        return self.poller.snapshot()

    def history(self, node: str) -> tuple[HistoryPoint, ...]:
        return self.poller.history(node) if self.poller is not None else ()

    def lanes(self) -> dict[str, LaneView]:
        return {name: w.view() for name, w in self._lanes.items()}

    def log_tail(self, lane: str, rank: int) -> tuple[list[LogLine], int]:
        """The buffered lines of one rank and how many were delivered so far."""
        watch = self._lanes.get(lane)
        if watch is None or rank not in watch.buffers:
            return [], 0
        return list(watch.buffers[rank]), watch.delivered.get(rank, 0)

    def alerts(self) -> list[Alert]:
        return list(self._alerts.values())

    # -- previews and actions ------------------------------------------------

    def preview_power_cycle(self, node: str) -> actions.ActionPreview:
        return actions.power_cycle_preview(self.config, self.snapshot(), self.lanes(), node)

    def preview_recover(self, node: str) -> actions.ActionPreview:
        return actions.power_cycle_preview(self.config, self.snapshot(), self.lanes(), node,
                                           recover=True)

    def preview_stop(self, lane: str) -> actions.ActionPreview:
        return actions.stop_preview(self.config, self.lanes(), lane)

    def preview_serve(self, recipe: str, cluster: str | None = None) -> actions.ActionPreview:
        r = self.recipes[recipe]
        return actions.serve_preview(self.config, self.snapshot(), self.lanes(), r,
                                     cluster or r.cluster)

    def preview_cluster_power(self, cluster: str, *, on: bool) -> actions.ActionPreview:
        return actions.cluster_power_preview(self.config, self.snapshot(), self.lanes(),
                                             cluster, on=on)

    async def run(self, preview: actions.ActionPreview) -> str:
        """Run a confirmed action through its ops workflow; returns the outcome.

        The workflows (issue 6: serve, stop, power-cycle, recover, cluster
        power, with their journal) are not in this build yet, so this refuses
        rather than improvising the steps the preview promised.
        """
        if not preview.allowed:
            raise PermissionError("; ".join(v.detail for v in preview.refusals))
        raise WorkflowUnavailable(
            f"{preview.kind} workflow is not available in this build (ops workflows pending); "
            "nothing was run")

    # -- internals -----------------------------------------------------------

    def _emit(self, event: ServiceEvent) -> None:
        try:
            self._sink(event)
        except Exception:  # a broken subscriber must not stop the watchers
            log.exception("service sink failed on %r", event)

    async def _consume(self, queue: asyncio.Queue[NodeSnapshot]) -> None:
        assert self.poller is not None
        while True:
            snap = await queue.get()
            verdict = self.detector.on_snapshot(snap)
            history = self.poller.history(snap.node)
            point = history[-1] if history and snap.probe is not None else None
            self._emit(NodeSampled(snap, verdict, point))
            self._alert_for(verdict)
            self._sync_lanes()

    def _alert_for(self, verdict: ThrashVerdict) -> None:
        key = f"thrash:{verdict.node}"
        if verdict.level >= ThrashLevel.SUSPECTED:
            alert = Alert(key, verdict.level.label, verdict.node, verdict.evidence,
                          verdict.next_step)
            if self._alerts.get(key) != alert:
                self._alerts[key] = alert
                self._emit(AlertRaised(alert))
        elif self._alerts.pop(key, None) is not None:
            self._emit(AlertCleared(key))

    def _sync_lanes(self) -> None:
        """Start a watch for each new lane, update ranks, drop removed lanes
        (only once every node answered, so an unreachable node hides nothing)."""
        assert self._links is not None
        snapshot = self.snapshot()
        found = discover_lanes(snapshot)
        for name, ranks in found.items():
            watch = self._lanes.get(name)
            if watch is None:
                links = {n: self._links.get(n) for n in self.config.nodes}
                watch = LaneWatch(
                    name, lane_cluster(snapshot, name), ranks, links=links, clock=self.clock,
                    sink=self._emit, stall_after_s=self.config.console.stall_after_s,
                    detector=self.detector, engine_probe=self._engine_probe,
                    protected=name in self.config.guards.protected_lanes,
                    uptime=lambda n=name: lane_uptime(self.snapshot(), n))
                self._lanes[name] = watch
                watch.start()
                watch.publish()
            elif watch.ranks != ranks:
                watch.update_ranks(ranks)
        if all(s.probe is not None for s in snapshot.nodes):
            for name in [n for n in self._lanes if n not in found]:
                watch = self._lanes.pop(name)
                self._tasks.append(asyncio.create_task(watch.stop(), name=f"stop:{name}"))
                self._emit(LaneGone(name))


def _drop(event: ServiceEvent) -> None:
    """The sink before `start()`: nothing listens yet."""
