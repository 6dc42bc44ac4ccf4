"""`ClusterService`: starts and owns the fleet, the poller, the thrash
detector, the journal followers and one watch per lane, and reports what
they learn to one sink. The console calls it; it never calls the console.

Every task it starts is cancelled by `stop()`; every network wait below it
has a timeout (the adapters and watchers enforce theirs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from sparktui.adapters.endpoints import Endpoints, resolve_endpoints
from sparktui.adapters.homeassistant import (
    HomeAssistant,
    TokenError,
    open_home_assistant,
    plug_power_source,
)
from sparktui.adapters.ping import LivenessCheck, check_liveness
from sparktui.adapters.ssh import Fleet
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config
from sparktui.core.errors import Problem
from sparktui.core.recipe import Recipe
from sparktui.core.recipe_load import load_all_recipes
from sparktui.core.state import ClusterSnapshot, HistoryPoint, NodeSnapshot
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.ops.confirm import confirmation_for
from sparktui.ops.context import OpsContext, Power, host_key_fingerprints
from sparktui.ops.events import WorkflowEvent
from sparktui.ops.guards import (
    GuardReport,
    Override,
    Verdict,
    evaluate_stop,
    plan_cluster_power,
)
from sparktui.ops.imagesync import ssh_image_pipe
from sparktui.ops.journal import Journal
from sparktui.ops.resume import Offer, close, offers, resume
from sparktui.ops.runlocks import RunLock, RunLocks, owner_alive
from sparktui.ops.shiftlog import render as render_shiftlog
from sparktui.ops.workflows.cluster_power import busy_nodes, cluster_power, plan_steps
from sparktui.ops.workflows.power import plan_power, plug_action, power_cycle, power_guards
from sparktui.ops.workflows.recover import plan_recover, recover
from sparktui.ops.workflows.runner import PlannedStep, WorkflowResult
from sparktui.ops.workflows.serve import ServeOptions, preview_serve, serve
from sparktui.ops.workflows.stop import find_lane, plan_stop, stop_lane
from sparktui.service.actions import ActionPreview, RunWorkflow
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    LaneGone,
    NodeSampled,
    ServiceEvent,
    Sink,
    WorkflowProgressed,
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


class ClusterService:
    def __init__(
        self,
        config: Config,
        *,
        links: NodeLinks | None = None,
        endpoints: Endpoints | None = None,
        clock: Clock | None = None,
        liveness: LivenessCheck = check_liveness,
        power: Power | None = None,
        engine_probe: EngineProbe | None = None,
        recipes: Mapping[str, Recipe] | None = None,
        state_dir: Path | None = None,
        follow_journals: bool = True,
    ) -> None:
        """Everything that does I/O can be injected (tests, benchmarks); by
        default the endpoints come from the config (or the running simulator),
        the links are an SSH `Fleet` and power is Home Assistant, all made by
        `start()` and closed by `stop()`."""
        self.config = config
        self.clock = clock or SystemClock()
        self._links = links
        self._endpoints = endpoints
        self._liveness = liveness
        self._power = power
        self._power_error = ""
        self._engine_probe = engine_probe
        self._state_dir = state_dir or config.state_dir()
        self._follow_journals = follow_journals
        self.recipe_problems: list[Problem] = []
        if recipes is None:
            loaded, self.recipe_problems = load_all_recipes(config)
            recipes = loaded
        self.recipes: dict[str, Recipe] = dict(recipes)
        self.detector = ThrashDetector(config.thrash, clock=self.clock)
        self.poller: Poller | None = None
        self.ops: OpsContext | None = None
        self._fleet: Fleet | None = None
        self._ha: HomeAssistant | None = None
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
        endpoints = self._endpoints
        if self._links is None:
            self._fleet = Fleet.from_config(self.config, endpoints, clock=self.clock)
            self._links = self._fleet
        if self._power is None:
            self._power = self._open_home_assistant(endpoints)
        if self._engine_probe is None:
            self._engine_probe = engine_probe_for(lambda n: endpoints.node(n).api_host)
        self.poller = Poller(self.config, self._links, endpoints, clock=self.clock,
                             liveness=self._liveness, power=self._power_source())
        self.ops = self._ops_context(endpoints)
        queue = self.poller.subscribe()
        self.poller.start()
        self._tasks.append(asyncio.create_task(self._consume(queue), name="service:snapshots"))
        if self._follow_journals:
            links = {n: self._links.get(n) for n in self.config.nodes}
            self._tasks.append(asyncio.create_task(self.detector.follow_journals(links),
                                                   name="service:journals"))

    def _power_source(self) -> PowerSource | None:
        """The poller's "is this node's plug on", read from the power adapter."""
        if self._power is None:
            return None
        return plug_power_source(self._power, {n.name: n.switch
                                               for n in self.config.nodes.values()})

    def _open_home_assistant(self, endpoints: Endpoints) -> HomeAssistant | None:
        """The adapter's one way in: with the simulator only its own token file."""
        try:
            self._ha = open_home_assistant(self.config, endpoints, clock=self.clock)
        except TokenError as exc:  # its message never holds the token
            self._power_error = str(exc)
            return None
        return self._ha

    def _ops_context(self, endpoints: Endpoints) -> OpsContext:
        assert self._links is not None and self.poller is not None
        links, fleet, poller = self._links, self._fleet, self.poller
        liveness, timeout = self._liveness, self.config.liveness.timeout_s

        async def snapshot(names: Sequence[str]) -> ClusterSnapshot:
            await asyncio.gather(*(poller.poll_node(n) for n in names))
            return poller.snapshot().select(list(names))

        async def alive(name: str) -> bool:
            return await liveness(endpoints.node(name), timeout)

        return OpsContext(
            config=self.config, link=links.get, power=self._power,  # type: ignore[arg-type]
            power_error=self._power_error, snapshot=snapshot, alive=alive,
            api_host=lambda n: endpoints.node(n).api_host,
            journal=Journal.in_state_dir(self._state_dir, self.clock),
            locks=RunLocks.in_state_dir(self._state_dir), clock=self.clock,
            emit=self._workflow_event,
            fingerprints=(lambda names: host_key_fingerprints(fleet, names)) if fleet else None,
            pipe_image=ssh_image_pipe(fleet) if fleet else None)

    def _workflow_event(self, event: WorkflowEvent) -> None:
        self._emit(WorkflowProgressed(event))

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
        if self._ha is not None:
            await self._ha.aclose()
            self._ha = None

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

    def _ctx(self) -> OpsContext:
        if self.ops is None:
            raise RuntimeError("the service is not started")
        return self.ops

    def _preview(self, kind: str, target: str, title: str, steps: list[PlannedStep],
                 report: GuardReport, run: RunWorkflow, *, nodes: tuple[str, ...] = (),
                 entities: tuple[str, ...] = ()) -> ActionPreview:
        return ActionPreview(kind, target, title, tuple(steps), report,
                             confirmation_for(kind, target, report), nodes, entities,
                             run if report.allowed else None)

    async def preview_power_cycle(self, node: str) -> ActionPreview:
        ctx = self._ctx()
        entity = self.config.nodes[node].switch
        return self._preview(
            "power-cycle", node, f"Power-cycle {node} ({self._state_word(node)})",
            plan_power(self.config, node, "cycle"), power_guards(ctx, node, "power cycle"),
            lambda: power_cycle(ctx, node), nodes=(node,), entities=(entity,))

    async def preview_recover(self, node: str) -> ActionPreview:
        ctx = self._ctx()
        entity = self.config.nodes[node].switch
        return self._preview(
            "recover", node, f"Recover {node} ({self._state_word(node)})",
            plan_recover(ctx, node), power_guards(ctx, node, "recover (power cycle)"),
            lambda: recover(ctx, node), nodes=(node,), entities=(entity,))

    async def preview_stop(self, lane: str) -> ActionPreview:
        ctx = self._ctx()
        watch = self._lanes.get(lane)
        ranks = list(watch.ranks) if watch is not None else await find_lane(ctx, lane)
        nodes = sorted({r.node for r in ranks})
        report = evaluate_stop(self.config, lane, nodes, ctx.locks.holders())
        if not ranks:
            report = GuardReport((*report.verdicts, Verdict(
                "lane", lane, False, f"no container labelled sparktui.lane={lane} on any node "
                                     "that answered -> nothing to stop")))
        return self._preview("stop", lane, f"Stop lane {lane}", plan_stop(ranks), report,
                             lambda: stop_lane(ctx, lane, ranks), nodes=tuple(nodes))

    async def preview_serve(self, recipe: str, cluster: str | None = None,
                            overrides: frozenset[Override] = frozenset()) -> ActionPreview:
        ctx = self._ctx()
        r = self.recipes[recipe]
        cluster = cluster or r.cluster
        options = ServeOptions(overrides=overrides)
        preview = await preview_serve(ctx, r, cluster, options)
        return self._preview(
            "serve", recipe, f"Serve {recipe} on {cluster}", list(preview.steps),
            preview.report, lambda: serve(ctx, r, cluster, options, preview),
            nodes=tuple(self.config.clusters[cluster].nodes))

    async def preview_cluster_power(self, cluster: str, *, on: bool) -> ActionPreview:
        ctx = self._ctx()
        p = plan_cluster_power(self.config, cluster, on, ctx.locks.holders())
        report = p.report
        if ctx.power is None:
            report = GuardReport((*report.verdicts, Verdict(
                "home-assistant", cluster, False,
                f"Home Assistant is not available: {ctx.power_error}")))
        if not on:
            report = GuardReport((*report.verdicts, *busy_nodes(
                [s for s in self.snapshot().nodes if s.node in p.nodes])))
        verb = "on" if on else "off"
        entities = (*p.switches_before, *(self.config.nodes[n].switch for n in p.nodes),
                    *p.switches_after)
        return self._preview(
            f"cluster-power-{verb}", cluster, f"Cluster power {verb}: {cluster}",
            plan_steps(ctx, p), report, lambda: cluster_power(ctx, cluster, on),
            nodes=p.nodes, entities=entities)

    def unfinished(self) -> list[Offer]:
        """Workflows the journal says began and never ended (offered at start)."""
        ctx = self._ctx()
        return offers(ctx.journal, ctx)

    async def preview_resume(self, offer: Offer) -> ActionPreview:
        ctx = self._ctx()
        record = offer.record
        steps = [PlannedStep("plug on", e, plug_action(e, True)) for e in offer.plugs_off]
        report = GuardReport((Verdict("journal", record.wf, True, offer.what),))
        return self._preview("resume", record.wf, f"Complete {record.workflow} "
                             f"{record.target}", steps, report, lambda: resume(ctx, record),
                             entities=offer.plugs_off)

    def close_unfinished(self, offer: Offer, reason: str) -> list[str]:
        return close(self._ctx(), offer.record, reason)

    def runlocks(self) -> list[RunLock]:
        return self._ctx().locks.list()

    async def preview_runlock_close(self, node: str) -> ActionPreview:
        ctx = self._ctx()
        lock = ctx.locks.get(node)
        if lock is None:
            report = GuardReport((Verdict("runlock", node, False, f"{node} holds no lock"),))
        else:
            alive = owner_alive(lock)
            report = GuardReport((Verdict(
                "runlock", node, alive is not True,
                f"{node}: {lock.describe()}" + (" -> its owner process is alive: let it "
                                                "finish" if alive else " (owner gone)")),))

        async def run() -> WorkflowResult:
            closed = ctx.locks.close(node)
            return WorkflowResult("", "runlock-close", node, closed is not None,
                                  f"lock of {node} closed" if closed else "no lock to close")

        return self._preview("runlock-close", node, f"Close the run lock of {node}", [
            PlannedStep("close lock", node, f"remove {node}'s lock file")], report, run,
            nodes=(node,))

    def shift_log(self, since_s: float = 16 * 3600) -> str:
        ctx = self._ctx()
        return render_shiftlog(ctx.journal.entries(), since=self.clock.time() - since_s)

    def _state_word(self, node: str) -> str:
        snap = self.snapshot().get(node)
        return snap.state.value if snap else "not polled"

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
            for watch in self._lanes.values():
                watch.on_snapshot(snap)

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
