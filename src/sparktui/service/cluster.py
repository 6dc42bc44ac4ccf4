"""`ClusterService`: starts and owns the fleet, the poller, the thrash
detector, the journal followers and one watch per lane, and reports what
they learn to one sink. The console calls it; it never calls the console.

Every task it starts is cancelled by `stop()`; every network wait below it
has a timeout (the adapters and watchers enforce theirs).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Protocol

from sparktui.adapters.endpoints import Endpoints
from sparktui.adapters.ping import LivenessCheck, check_liveness
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config
from sparktui.core.errors import Problem
from sparktui.core.measured import BootFigures
from sparktui.core.nodehealth import Finding, node_findings
from sparktui.core.recipe import Recipe
from sparktui.core.recipe_load import load_all_recipes, load_recipe
from sparktui.core.state import ClusterSnapshot, HistoryPoint, NodeSnapshot
from sparktui.core.thrash import ThrashVerdict
from sparktui.ops.bundle import BundleResult, BundleSources, token_values, write_bundle
from sparktui.ops.context import OpsContext, Power, open_runtime
from sparktui.ops.events import StepFinished, WorkflowEvent, WorkflowFinished, WorkflowStarted
from sparktui.ops.guards import Override
from sparktui.ops.journal import clock_of
from sparktui.ops.journal_tail import JournalTail
from sparktui.ops.lanes import discover_lanes
from sparktui.ops.observe import observe
from sparktui.ops.plan import Needs, Workflow
from sparktui.ops.resume import Offer, close, offers
from sparktui.ops.runlocks import RunLock
from sparktui.ops.shiftlog import render as render_shiftlog
from sparktui.ops.stop_intents import StopIntents
from sparktui.ops.workflows.bench import LaneBench
from sparktui.ops.workflows.cluster_power import ClusterPower
from sparktui.ops.workflows.envelope import Envelope
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power import PowerCycle
from sparktui.ops.workflows.power_resume import Resume
from sparktui.ops.workflows.prompt import LanePrompt
from sparktui.ops.workflows.qualify import (
    LaneNews,
    Qualify,
    lane_news,
    oom_news,
    recipe_ceiling,
)
from sparktui.ops.workflows.record_boot import RecordBoot
from sparktui.ops.workflows.recover import Recover
from sparktui.ops.workflows.runlock_close import RunlockClose
from sparktui.ops.workflows.serve import Serve, ServeOptions
from sparktui.ops.workflows.stop import Stop
from sparktui.service.actions import ActionPreview
from sparktui.service.alerts import Alerts
from sparktui.service.attach import SentinelFeed, lost_alert, reattach
from sparktui.service.events import (
    Alert,
    LaneGone,
    NodeSampled,
    ServiceEvent,
    Sink,
    WorkflowProgressed,
)
from sparktui.service.lane_feed import LaneFeed
from sparktui.service.lanes import LaneView, lane_cluster, lane_uptime
from sparktui.service.night import NightDesk, Phone
from sparktui.service.reads import ClusterReads, LocalReads, MirrorReads
from sparktui.service.recipe_copies import RecipeCopies
from sparktui.service.stream import StreamState
from sparktui.watch.canary import Completer, ServingCanary, completer_for
from sparktui.watch.follower import LogLine
from sparktui.watch.lane import LaneEvent, LaneWatcher, LaneWatchers, MemoryRead
from sparktui.watch.oom import OomWatch, lane_load_plan
from sparktui.watch.poller import Poller
from sparktui.watch.readiness import NodeLink, RankContainer
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
        canary: Completer | None = None,
        recipes: Mapping[str, Recipe] | None = None,
        state_dir: Path | None = None,
        follow_journals: bool = True,
        sentinel: Path | None = None,
        attached_only: bool = False,
    ) -> None:
        """Everything that does I/O can be injected (tests, benchmarks); by
        default the endpoints come from the config (or the running simulator),
        the links are an SSH `Fleet` and power is Home Assistant, all made by
        `start()` and closed by `stop()`. ``sentinel``: the socket of a running
        sentinel (service/attach.py) to take the nodes' and lanes' events from
        instead of polling them a second time (the console's); ``attached_only``
        (each `sparktui web` session): never poll them itself, not even while
        that sentinel is gone (its last state shown stale until it is back)."""
        self.config = config
        self.clock = clock or SystemClock()
        self._links = links
        self._endpoints = endpoints
        self._liveness = liveness
        self._power = power
        self._canary = canary
        self._state_dir = state_dir or config.state_dir()
        self._follow_journals = follow_journals
        self._sentinel = sentinel
        self._attached_only = attached_only and sentinel is not None
        self._serve_watchers: LaneWatchers | None = None
        """While attached: the watchers of a boot a serve from here starts (the
        sentinel's watch of the lane is the one shown)."""
        self._snapshots: asyncio.Queue[NodeSnapshot] | None = None
        self._alone: list[asyncio.Task[None]] = []
        """The tasks of watching alone (`_watch_alone`), stopped on re-attaching."""
        self._running: set[str] = set()
        """Workflows this console runs now (their ids): while it watches alone
        their lane watchers are its own, so it re-attaches only when none runs."""
        self.attached = ""
        """``attached to sentinel (pid N)`` while attached, else empty."""
        self._ha: Phone | None = None
        self.recipe_problems: list[Problem] = []
        if recipes is None:
            loaded, self.recipe_problems = load_all_recipes(config)
            recipes = loaded
        self._recipes = RecipeCopies(config, recipes)
        self.recipes: dict[str, Recipe] = self._recipes.held
        """Each recipe as last read; `recipe` reads one again once its file changed."""
        self.detector = ThrashDetector(config.thrash, clock=self.clock)
        self.poller: Poller | None = None
        self.ops: OpsContext | None = None
        self._stack: AsyncExitStack | None = None
        self._sink: Sink = _drop
        self._tasks: list[asyncio.Task[None]] = []
        self._watchers = LaneWatchers(on_new=self._lane_watched)
        """One watcher per lane, shared with a serve started here."""
        self._lanes: dict[str, LaneFeed] = {}
        self._stops: StopIntents | None = None
        self.journal: JournalTail | None = None
        """The journal, read as it grows (set by `start`): the stop intents'
        reader, and the sentinel's of every workflow."""
        self._reads: ClusterReads = self._local_reads()
        """Where snapshots, lanes, logs and verdicts are read: this process's
        watch, or an attached sentinel's stream."""
        self._alerts = Alerts(self._emit)
        self.night = NightDesk(config, clock=self.clock, state_dir=self._state_dir)

    # -- lifecycle -----------------------------------------------------------

    async def start(self, sink: Sink) -> None:
        """Connect and start watching; events go to ``sink`` from now on.
        Raises `EndpointError` when the endpoints cannot be resolved."""
        self._sink = sink
        feed = await SentinelFeed.attach(self._sentinel, self.clock) \
            if self._sentinel is not None else None
        stack = AsyncExitStack()
        watchers: LaneWatchers = self._watchers
        if feed is not None:
            stack.push_async_callback(feed.close)
            watchers = self._serve_watchers = LaneWatchers()
        try:
            rt = await stack.enter_async_context(open_runtime(
                self.config, emit=self._workflow_event, clock=self.clock,
                endpoints=self._endpoints, links=self._links, power=self._power,
                liveness=self._liveness, state_dir=self._state_dir,
                lane_watchers=watchers))
        except BaseException:
            await stack.aclose()
            raise
        if watchers is not self._watchers:  # a serve's watch ends before its links close
            stack.push_async_callback(watchers.close)
        self._stack = stack
        self._links, self._endpoints = rt.links, rt.endpoints
        endpoints = rt.endpoints
        self._canary = self._canary or completer_for(lambda n: endpoints.node(n).api_host)
        self.poller = rt.poller
        self.ops = rt.ops
        self.journal = JournalTail(rt.ops.journal.path)
        self._stops = StopIntents(rt.ops.journal, self.journal)  # another process's stop
        self._ha = rt.ha
        if feed is not None or self._attached_only:
            # the sentinel polls, watches, records and notifies
            if feed is not None:
                self._mirror(feed)
            self._tasks.append(asyncio.create_task(self._from_sentinel(feed),
                                                   name="service:sentinel"))
        else:
            self._reads = self._local_reads()
            self._watch_alone()

    def _local_reads(self) -> LocalReads:
        return LocalReads(self.poller, self._lanes, self._watchers, self.detector, self.clock)

    def _watch_alone(self) -> None:
        """Poll, watch lanes, follow journals, record and notify in this process."""
        assert self.poller is not None and self._links is not None and self.ops is not None
        endpoints = self._endpoints
        assert endpoints is not None
        self.night.attach(lambda: self._bundle_sources(endpoints),
                          lambda: self.detector.journal_tails, emit=self._emit, phone=self._ha)
        self.ops.lane_watchers = self._watchers
        if self._snapshots is None:
            self._snapshots = self.poller.subscribe()
        while not self._snapshots.empty():  # polled before the sentinel came back
            self._snapshots.get_nowait()
        self.poller.start()
        self._alone.append(asyncio.create_task(self._consume(self._snapshots),
                                               name="service:snapshots"))
        if self._follow_journals:
            links = {n: self._links.get(n) for n in self.config.nodes}
            self._alone.append(asyncio.create_task(self.detector.follow_journals(links),
                                                   name="service:journals"))

    async def _stop_alone(self) -> None:
        """A sentinel answers again: this process's poller, lane watches and
        journal followers stop, and its desk neither records nor phones."""
        assert self.poller is not None and self.ops is not None
        self.night.detach()
        await self.poller.stop()
        tasks, self._alone = self._alone, []
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        feeds = list(self._lanes.values())
        self._lanes.clear()
        await asyncio.gather(*(f.close() for f in feeds), return_exceptions=True)
        watchers, self._watchers = self._watchers, LaneWatchers(on_new=self._lane_watched)
        await watchers.close()
        self.ops.lane_watchers = self._serve_watchers

    def _mirror(self, feed: SentinelFeed) -> None:
        """Read what the sentinel reports (it polls, watches, records and notifies)."""
        self._reads = MirrorReads(feed.state, tuple(self.config.nodes), self.clock)
        self.attached = f"attached to sentinel (pid {feed.pid})"

    async def _from_sentinel(self, feed: SentinelFeed | None) -> None:
        """The sentinel's events until its stream ends; then this console says
        so, watches alone (or, ``attached_only``, shows the sentinel's last state
        as stale and only waits) and tries to attach again (not while a workflow
        it runs is going) until a sentinel answers: then it stops watching alone
        and shows the new stream, whose replay clears what it does not hold
        (the lost alert first of all). ``feed`` None: none answered at the start
        (``attached_only``)."""
        assert self._sentinel is not None
        lanes: set[str] | None = None
        """Once re-attached: the lanes this console shows (the last sentinel's, its own)."""
        pid: int | None = None
        state = StreamState()
        why = f"answers at {self._sentinel}"
        while True:
            if feed is not None:
                try:
                    shown = None
                    if lanes is not None:  # re-attached: its own watch stops first
                        lanes |= set(self._lanes)
                        if self._alone:
                            await self._stop_alone()
                        self._mirror(feed)
                        shown = (lanes, set(self._alerts.active))
                        log.info("re-attached to the sentinel (pid %d)", feed.pid)
                    why = await feed.follow(self._from_remote, shown)
                finally:
                    await feed.close()
                pid, state = feed.pid, feed.state
            self.attached = ""
            if self._attached_only:
                self._reads = MirrorReads(state, tuple(self.config.nodes), self.clock,
                                          lost_at=self.clock.time())
            else:
                self._watch_alone()
            self._alerts.raise_(lost_alert(pid, why, polls=not self._attached_only))
            lanes = set(state.lanes)
            feed = await reattach(self._sentinel, self.clock, lambda: not self._running)

    def _from_remote(self, event: ServiceEvent) -> None:
        """An event of the sentinel's: its night desk recorded it and sent the
        phone alert, so it goes straight to the console (held for a bundle
        written from here, as the console's own would be)."""
        self.night.memory.fold(event)
        self._alerts.keep(event)
        try:
            self._sink(event)
        except Exception:  # a broken subscriber must not stop the stream
            log.exception("service sink failed on %r", event)

    def _bundle_sources(self, endpoints: Endpoints) -> BundleSources:
        assert self._links is not None and self.ops is not None
        extra = [endpoints.ha_token_file] if endpoints.simulated else []
        return BundleSources(self.config, self._links.get, self.ops.journal,  # type: ignore[arg-type]
                             self.clock, self._state_dir, token_values(self.config, extra))

    def _workflow_event(self, event: WorkflowEvent) -> None:
        if isinstance(event, StepFinished) and self.poller is not None:
            self.poller.refresh(event.target)  # containers, disks: read them now
        if isinstance(event, WorkflowStarted):
            self._running.add(event.wf)
        elif isinstance(event, WorkflowFinished):
            self._running.discard(event.wf)
        self._emit(WorkflowProgressed(event))
        if (news := lane_news(event)) is not None:
            self._lane_news(news)

    def _lane_news(self, news: LaneNews) -> None:
        """A gate verdict onto its lane's view; a garbled/slow lane or a predicted
        OOM as an alert (the gate never stops a lane itself)."""
        if news.kind == "gate" and (watch := self._lanes.get(news.subject)) is not None:
            watch.gate = (news.state, news.text)
            watch.publish()
        self._alerts.news(news)

    async def stop(self) -> None:
        """Cancel every task this service started and close the connections."""
        await self.night.stop()
        if self.poller is not None:
            await self.poller.stop()
        tasks, self._tasks, self._alone = [*self._tasks, *self._alone], [], []
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        feeds = list(self._lanes.values())
        self._lanes.clear()  # the reads hold this dict
        await asyncio.gather(*(f.close() for f in feeds), return_exceptions=True)
        await self._watchers.close()
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    # -- reading -------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        return self._reads.snapshot()

    def history(self, node: str) -> tuple[HistoryPoint, ...]:
        return self._reads.history(node)

    def lanes(self) -> dict[str, LaneView]:
        return self._reads.lanes()

    def log_tail(self, lane: str, rank: int) -> tuple[list[LogLine], int]:
        """The buffered lines of one rank and how many were delivered so far."""
        return self._reads.log_tail(lane, rank)

    def alerts(self) -> list[Alert]:
        return list(self._alerts.active.values())

    def verdict(self, node: str) -> ThrashVerdict:
        """The node's memory verdict now (the sentinel's while attached)."""
        return self._reads.verdict(node)

    # -- previews and actions ------------------------------------------------

    def _ctx(self) -> OpsContext:
        if self.ops is None:
            raise RuntimeError("the service is not started")
        return self.ops

    async def _preview(self, workflow: Workflow, title: str) -> ActionPreview:
        """The workflow's plan, from a fresh observation, as the confirm modal shows
        it; confirming runs that same plan (re-checked before the first step)."""
        ctx = self._ctx()
        plan = await prepare(ctx, workflow)
        return ActionPreview.of(plan, title, lambda: execute(ctx, plan))

    async def preview_power_cycle(self, node: str) -> ActionPreview:
        return await self._preview(PowerCycle(node),
                                   f"Power-cycle {node} ({self._state_word(node)})")

    async def preview_recover(self, node: str) -> ActionPreview:
        return await self._preview(Recover(node), f"Recover {node} ({self._state_word(node)})")

    async def preview_stop(self, lane: str) -> ActionPreview:
        return await self._preview(Stop(lane), f"Stop lane {lane}")

    async def preview_qualify(self, lane: str, depth: int = 0) -> ActionPreview:
        """The quality gate on a serving lane (reads only; its guards: the lane
        exists and serves)."""
        return await self._preview(Qualify(lane, depth), f"Qualify lane {lane}")

    async def preview_prompt(self, lane: str, tokens: int, send: Callable[[], object],
                             overrides: frozenset[Override] = frozenset()) -> ActionPreview:
        """One long prompt to a serving lane (the demo's trigger; ``send`` sends it)
        under the prompt-length guard: beyond the lane's measured ceiling, or its
        first rung while unmeasured, it is refused unless overridden by the typed name."""
        return await self._preview(LanePrompt(lane, tokens, send, overrides),
                                   f"Send a {tokens:,}-token prompt to {lane}")

    async def preview_envelope(self, lane: str,
                               overrides: frozenset[Override] = frozenset()) -> ActionPreview:
        """The long-prompt ladder on a serving lane (`sparktui envelope LANE`, its
        default rungs): it writes the recipe's ``[fit] prefill_*``."""
        return await self._preview(Envelope(lane, overrides=overrides),
                                   f"Envelope of lane {lane} (long-prompt ladder)")

    async def preview_bench(self, lane: str,
                            overrides: frozenset[Override] = frozenset()) -> ActionPreview:
        """The bench table of a serving lane (`sparktui bench LANE`, its default
        depths and concurrency): a report, the headline figures into the recipe."""
        return await self._preview(LaneBench(lane, overrides=overrides), f"Bench lane {lane}")

    async def preview_record_boot(self, recipe: str, boot: BootFigures) -> ActionPreview:
        """Record what ``boot`` measured into the recipe as it is on disk now (the
        console's offer after a serve it ran; `sparktui fit --record` alike)."""
        return await self._preview(RecordBoot(load_recipe(self.config, recipe), boot),
                                   f"Record boot {boot.boot}'s figures into {recipe}")

    def recipe(self, name: str) -> Recipe:
        """The recipe as its file says now (service/recipe_copies.py): the next
        preview uses what record, an envelope, a bench or a boot's figures wrote."""
        return self._recipes.get(name)

    def prompt_ceiling(self, lane: str) -> int | None:
        """The lane's measured longest safe prompt (read from its recipe now: an
        envelope run since the start wrote it), None while unmeasured."""
        return recipe_ceiling(self.config, lane)

    async def preview_serve(self, recipe: str, cluster: str | None = None,
                            overrides: frozenset[Override] = frozenset()) -> ActionPreview:
        """``overrides``: the console's override of an overridable refusal (the
        name is then typed, and the run journals them, as the CLI's --override)."""
        r = self.recipe(recipe)
        cluster = cluster or r.cluster
        return await self._preview(Serve(r, cluster, ServeOptions(overrides=overrides)),
                                   f"Serve {recipe} on {cluster}")

    async def preview_cluster_power(self, cluster: str, *, on: bool) -> ActionPreview:
        verb = "on" if on else "off"
        return await self._preview(ClusterPower(cluster, on), f"Cluster power {verb}: {cluster}")

    def unfinished(self) -> list[Offer]:
        """Workflows the journal says began and never ended (offered at start)."""
        ctx = self._ctx()
        return offers(ctx.journal, ctx)

    async def preview_resume(self, offer: Offer) -> ActionPreview:
        record = offer.record
        return await self._preview(Resume(record.wf),
                                   f"Complete {record.workflow} {record.target}")

    def close_unfinished(self, offer: Offer, reason: str) -> list[str]:
        return close(self._ctx(), offer.record, reason)

    def runlocks(self) -> list[RunLock]:
        return self._ctx().locks.list()

    def runlock_lines(self) -> list[str]:
        """Each lock in one line, a stale one (its owner gone) with its pid and age."""
        return self._ctx().locks.lines(time.time())

    async def preview_runlock_close(self, node: str) -> ActionPreview:
        return await self._preview(RunlockClose(node), f"Close the run lock of {node}")

    def findings(self, node: str) -> list[Finding]:
        """What is wrong with ``node`` from its latest snapshot (core/nodehealth: the
        same definition the serve guards and `sparktui health` use)."""
        return node_findings(self.config, self.snapshot().get(node), node)

    async def bundle(self, subject: str, reason: str) -> BundleResult:
        """An incident bundle of a lane or a node now (the console's alert list),
        written as `sparktui bundle` writes it, with what this console holds of
        nodes gone dark."""
        if self._endpoints is None:
            raise RuntimeError("the service is not started")
        return await write_bundle(self._bundle_sources(self._endpoints), subject,
                                  held=self.night.memory.held(self.detector.journal_tails),
                                  reason=reason)

    async def switch_states(self) -> dict[str, str | None]:
        """Each shared switch's state now, by name: on, off, unavailable; None when
        Home Assistant did not answer (read as the guards read them)."""
        switches = self.config.switches
        state = await observe(self._ctx(), Needs(switches=tuple(
            sw.entity for sw in switches.values())))
        return {name: state.switch_states.get(sw.entity) for name, sw in switches.items()}

    def shift_log(self, since_s: float = 16 * 3600) -> str:
        """The last ``since_s`` of the journal, as `sparktui shiftlog --since`
        takes an age: back from now on this service's clock for the entries
        stamped on it, from its latest entry on the other clock (a demo's
        journal read on wall time, or a shell's read in the demo)."""
        ctx = self._ctx()
        return render_shiftlog(ctx.journal.entries(), ago=since_s, now=self.clock.time(),
                               clock=clock_of(self.clock))

    def _state_word(self, node: str) -> str:
        snap = self.snapshot().get(node)
        return snap.state.value if snap else "not polled"

    # -- internals -----------------------------------------------------------

    def _emit(self, event: ServiceEvent) -> None:
        """Every event this service reports, in order: the night desk's, then
        the sink's; the alerts among them are kept (service/alerts.py)."""
        try:
            event = self.night.on_event(event)  # an alert already sent is marked "notified"
        except Exception:  # the night desk must not stop the watchers either
            log.exception("night desk failed on %r", event)
        self._alerts.keep(event)
        try:
            self._sink(event)
        except Exception:  # a broken subscriber must not stop the watchers
            log.exception("service sink failed on %r", event)

    async def _consume(self, queue: asyncio.Queue[NodeSnapshot]) -> None:
        assert self.poller is not None
        while True:
            snap = await queue.get()
            if isinstance(self._reads, MirrorReads):  # the sentinel went: watching alone
                self._reads = self._local_reads()
            verdict = self.detector.on_snapshot(snap)
            history = self.poller.history(snap.node)
            point = history[-1] if history and snap.probe is not None else None
            self._emit(NodeSampled(snap, verdict, point))
            self._alerts.thrash(verdict)
            await self._sync_lanes()
            for feed in self._lanes.values():
                feed.watcher.on_snapshot(snap)
                feed.publish()

    async def _sync_lanes(self) -> None:
        """Start a watch for each new lane, update ranks, drop removed lanes
        (only once every node answered, so an unreachable node hides nothing,
        and once the lane's watcher said how it ended: `LaneFeed.gone`)."""
        assert self._links is not None
        snapshot = self.snapshot()
        found = discover_lanes(snapshot)
        for name, ranks in found.items():
            make = lambda n=name, r=ranks: self._new_watcher(n, r)  # noqa: E731
            watch = self._watchers.attach(name, make)
            self._lanes[name].listed()
            rank0 = next((r for r in ranks if r.rank == 0 and r.port), None)
            if rank0 is not None and watch.api_host != self._api_host(rank0.node):
                # found before rank 0's node was polled: the watch has no API
                # host, so no endpoint check (and no canary verdict) ever came
                await self._watchers.replace(name, make)
            elif watch.ended_before(ranks, listed_since(snapshot, ranks)):
                # stopped and served again between two polls, under the same names
                await self._watchers.replace(name, make)
            elif watch.ranks != ranks:
                watch.update_ranks(ranks)
                self._lanes[name].publish()
        if all(s.probe is not None for s in snapshot.nodes):
            for name in [n for n in self._lanes if n not in found]:
                if any(s.listed_since() <= self._lanes[name].watcher.created_at
                       for s in snapshot.nodes):
                    continue  # a serve's new lane: its containers are not polled yet
                if not self._lanes[name].gone(self.clock.time()):
                    continue  # its watcher has not said how it ended yet
                feed = self._lanes.pop(name)
                feed.detach()  # its watcher, dropped below, is heard no more from here
                self._tasks.append(asyncio.create_task(feed.close(), name=f"close:{name}"))
                self._tasks.append(asyncio.create_task(self._watchers.drop(name),
                                                       name=f"stop:{name}"))
                self._alerts.lane_gone(name)  # its FATAL, gate, canary: cleared first
                self._emit(LaneGone(name))

    def _new_watcher(self, name: str, ranks: tuple[RankContainer, ...]) -> LaneWatcher:
        """A lane found in a snapshot: its memory comes from the poller."""
        assert self._links is not None and self._endpoints is not None
        links = {n: self._links.get(n) for n in self.config.nodes}
        return LaneWatcher(name, ranks, links, self._api_host(ranks[0].node),
                           stall_after_s=self.config.console.stall_after_s, clock=self.clock,
                           first_token=False, resource_poll_s=None,
                           stop_intent=self._stops.from_now() if self._stops else None)

    def _api_host(self, node: str) -> str:
        assert self._endpoints is not None
        return self._endpoints.node(node).api_host

    def _lane_watched(self, watch: LaneWatcher) -> None:
        """A new watcher (found here, or a serve's): the console follows it."""
        old = self._lanes.pop(watch.lane, None)
        if old is not None:
            old.detach()  # the old boot's watcher says nothing more of the lane
            self._tasks.append(asyncio.create_task(old.close(), name=f"close:{watch.lane}"))
        feed = self._lanes[watch.lane] = LaneFeed(
            watch, lambda: lane_cluster(self.snapshot(), watch.lane), self._emit,
            detector=self.detector, protected=watch.lane in self.config.guards.protected_lanes,
            uptime=lambda: lane_uptime(self.snapshot(), watch.lane),
            canary=self._serving_canary(watch.lane))
        if old is not None:
            feed.gate = old.gate
        if (load := lane_load_plan(self.config, self._recipes.lane(watch.lane),
                                   [r.node for r in watch.ranks])):
            feed.weights_gib = load.weights_gib
            oom = OomWatch(watch.lane, lambda: watch.ranks, watch.tracker, load, self.clock,
                           lambda p: self._lane_news(oom_news(p)))

            def on_memory(event: LaneEvent) -> None:
                if isinstance(event, MemoryRead):
                    oom.on_memory(event.node, event.available_kib)

            watch.subscribe(on_memory)
        feed.publish()


    def _serving_canary(self, lane: str) -> ServingCanary:
        """The lane's canary: rounds every [console] canary_interval_s unless
        that is 0 or the lane's recipe says ``[readiness] canary = false``."""
        recipe = self._recipes.lane(lane)
        interval = self.config.console.canary_interval_s
        off = interval <= 0 or (recipe is not None and not recipe.readiness.canary)
        return ServingCanary(lane, clock=self.clock, interval_s=None if off else interval,
                             complete=self._canary, detector=self.detector,
                             on_verdict=lambda v: self._alerts.canary(lane, v))


def _drop(event: ServiceEvent) -> None:
    """The sink before `start()`: nothing listens yet."""


def listed_since(snapshot: ClusterSnapshot, ranks: tuple[RankContainer, ...]) -> float:
    """The time the lane's ranks are known to run as of: the oldest container
    list among their nodes (a list carried from an earlier slow tick says
    nothing of a stop since)."""
    nodes = {r.node for r in ranks}
    return min((s.listed_since() for s in snapshot.nodes if s.node in nodes),
               default=snapshot.taken_at)
