"""One lane's watch: every rank's log followed, fed to the boot-phase
tracker and the thrash detector, kept in a bounded buffer per rank, and the
lane's endpoint checked once it is up. The watch owns its tasks; `stop()`
cancels them."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Protocol

from sparktui.adapters.engine_http import EngineClient
from sparktui.core.advice import fatal_next_step
from sparktui.core.clock import Clock
from sparktui.core.logsig import Phase
from sparktui.core.phases import MemoryProgress, PhaseTracker
from sparktui.core.state import NodeSnapshot
from sparktui.service.events import Alert, AlertRaised, LaneChanged, LogLinesArrived, Sink
from sparktui.service.lanes import LaneView
from sparktui.watch.canary import ServingCanary
from sparktui.watch.follower import LogFollower, LogLine, running_check
from sparktui.watch.readiness import NodeLink, RankContainer
from sparktui.watch.thrash import ThrashDetector

log = logging.getLogger(__name__)

LOG_BUFFER_LINES = 5000
"""Lines kept per rank; older ones are dropped (the follower can re-read them)."""
FEED_SLICE = 64
"""Lines classified between two yields to the event loop during a burst."""
ENDPOINT_EVERY_S = 5.0
ENGINE_TIMEOUT_S = 3.0


class EngineProbe(Protocol):
    async def __call__(self, node: str, port: int) -> tuple[str, dict[str, float]]: ...


class LaneWatch:
    def __init__(
        self,
        name: str,
        cluster: str,
        ranks: tuple[RankContainer, ...],
        *,
        links: Mapping[str, NodeLink],
        clock: Clock,
        sink: Sink,
        stall_after_s: float,
        detector: ThrashDetector | None = None,
        engine_probe: EngineProbe | None = None,
        protected: bool = False,
        uptime: Callable[[], float | None] = lambda: None,
        canary: ServingCanary | None = None,
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.ranks = ranks
        self._links = links
        self._clock = clock
        self._sink = sink
        self._detector = detector
        self._engine_probe = engine_probe
        self._protected = protected
        self._uptime = uptime
        self._canary = canary
        self.tracker = PhaseTracker(name, stall_after_s, clock.monotonic())
        self._memory = MemoryProgress()
        self.buffers: dict[int, deque[LogLine]] = {}
        self.delivered: dict[int, int] = {}
        self._health = "—"
        self._decode_tps: float | None = None
        self.on_memory: Callable[[str, int], None] | None = None
        """Called with (node, MemAvailable KiB) of a rank's node while the lane
        boots (the service's OOM prediction, watch/oom.py)."""
        self.gate: tuple[str, str] = ("", "")
        """(state, one-line verdict) of the lane's last quality gate (the service sets it)."""
        self._last_tokens: tuple[float, float] | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._alerted = False
        self._last_view: LaneView | None = None

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        for rc in self.ranks:
            self._follow(rc)
        if "ticker" not in self._tasks:
            self._tasks["ticker"] = asyncio.create_task(self._tick(), name=f"lane:{self.name}")
        if self._canary is not None and "canary" not in self._tasks:
            self._tasks["canary"] = asyncio.create_task(
                self._canary.run(self._serving_endpoint), name=f"canary:{self.name}")

    def _serving_endpoint(self) -> tuple[str, int] | None:
        """Rank 0's (node, port) while the lane serves: the canary's target."""
        first = self.ranks[0] if self.ranks else None
        if self.tracker.phase is not Phase.SERVING or first is None or not first.port:
            return None
        return first.node, first.port

    def update_ranks(self, ranks: tuple[RankContainer, ...]) -> None:
        """Ranks seen in a newer snapshot; followers start for new containers."""
        self.ranks = ranks
        for rc in ranks:
            self._follow(rc)
        self.publish()

    async def stop(self) -> None:
        tasks, self._tasks = list(self._tasks.values()), {}
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _follow(self, rc: RankContainer) -> None:
        key = f"rank:{rc.rank}:{rc.container}"
        if key in self._tasks or rc.node not in self._links:
            return
        self.buffers.setdefault(rc.rank, deque(maxlen=LOG_BUFFER_LINES))
        self._tasks[key] = asyncio.create_task(self._follow_rank(rc), name=f"log:{rc.container}")

    def on_snapshot(self, snap: NodeSnapshot) -> None:
        """A poll of one node: while the lane boots, memory filling on a rank's
        node is load progress (InstantTensor and worker ranks print no shards)."""
        if self.tracker.phase in (Phase.SERVING, Phase.FAILED):
            return
        mem = snap.probe.meminfo if snap.probe is not None else None
        if mem is None or all(rc.node != snap.node for rc in self.ranks):
            return
        if self.on_memory is not None:
            self.on_memory(snap.node, mem.available_kib)
        note = self._memory.observe(snap.node, mem.available_kib)
        if note is not None:
            self.tracker.note_progress(note, self._clock.monotonic())

    # -- reading -------------------------------------------------------------

    def view(self) -> LaneView:
        t = self.tracker
        lp = t.load_progress() if t.phase is Phase.LOADING else None
        first = self.ranks[0] if self.ranks else None
        canary = self._canary.verdict if self._canary is not None else None
        unresponsive = canary is not None and canary.unresponsive and t.phase is Phase.SERVING
        return LaneView(
            name=self.name,
            cluster=self.cluster,
            engine=first.engine if first else "",
            port=first.port if first else None,
            ranks=self.ranks,
            phase="unresponsive" if unresponsive else t.phase.value,
            progress=lp.fraction if lp else None,
            progress_text=lp.describe() if lp else "",
            load=lp,
            kv_tokens=t.kv.tokens,
            concurrency=t.kv.concurrency,
            health=self._health,
            decode_tps=self._decode_tps,
            uptime_s=self._uptime(),
            protected=self._protected,
            failure=t.failure.describe() if t.failure else "",
            canary=canary.evidence if canary is not None else (),
            stale_s=self._canary.stale_s(ENDPOINT_EVERY_S) if self._canary else None,
            gate=self.gate[0],
            gate_text=self.gate[1],
        )

    def publish(self) -> None:
        """Report the lane when what the console shows of it changed."""
        view = self.view()
        if view != self._last_view:
            self._last_view = view
            self._sink(LaneChanged(view))

    # -- tasks ---------------------------------------------------------------

    async def _follow_rank(self, rc: RankContainer) -> None:
        link = self._links[rc.node]
        follower = LogFollower.for_container(
            link, rc.container, rc.rank, still_running=running_check(link, rc.container),
            clock=self._clock)
        buffer = self.buffers[rc.rank]
        async for batch in follower.batches():
            now = self._clock.monotonic()
            for i, line in enumerate(batch, 1):
                ev = self.tracker.feed(rc.rank, line.raw, now)
                if ev is not None and self._detector is not None:
                    self._detector.on_event(rc.node, ev)
                if i % FEED_SLICE == 0:
                    await asyncio.sleep(0)  # a burst must not hold the loop (keys, frames)
            buffer.extend(batch)
            end = self.delivered[rc.rank] = self.delivered.get(rc.rank, 0) + len(batch)
            self._sink(LogLinesArrived(self.name, rc.rank, tuple(batch), end))
            self._check_failure()
            self.publish()

    def _check_failure(self) -> None:
        failure = self.tracker.failure
        if failure is None or self._alerted:
            return
        self._alerted = True
        evidence = (f"rank {failure.rank} ({self.tracker.phase}): {failure.line}",
                    *failure.context[-3:])
        step = fatal_next_step(failure.kind, failure.rank)
        self._sink(AlertRaised(Alert(f"fatal:{self.name}", "fatal", self.name, evidence, step)))

    async def _tick(self) -> None:
        while True:
            await self._clock.sleep(ENDPOINT_EVERY_S)
            self.tracker.check_stall(self._clock.monotonic())
            if self._engine_probe is not None and self.ranks and self.ranks[0].port:
                phase = self.tracker.phase
                if phase in (Phase.API_STARTING, Phase.SERVING):
                    await self._check_endpoint(self.ranks[0].node, self.ranks[0].port)
            self.publish()

    async def _check_endpoint(self, node: str, port: int) -> None:
        assert self._engine_probe is not None
        try:
            self._health, metrics = await self._engine_probe(node, port)
        except Exception as exc:  # a bad answer must not end the watch
            log.warning("endpoint of %s: %r", self.name, exc)
            self._health = "error"
            return
        if self._canary is not None:
            self._canary.observe(self._health, metrics, [r.node for r in self.ranks])
        tokens = metrics.get("vllm:generation_tokens_total",
                             metrics.get("sglang:generation_tokens_total"))
        if tokens is None:
            return
        now = self._clock.monotonic()
        if self._last_tokens is not None and now > self._last_tokens[0]:
            self._decode_tps = max(0.0, (tokens - self._last_tokens[1])
                                   / (now - self._last_tokens[0]))
        self._last_tokens = (now, tokens)


def engine_probe_for(api_host: Callable[[str], str]) -> EngineProbe:
    """Health and metrics of a lane's endpoint through the engine HTTP adapter."""

    async def probe(node: str, port: int) -> tuple[str, dict[str, float]]:
        async with EngineClient(api_host(node), port, timeout=ENGINE_TIMEOUT_S) as client:
            answer = await client.health()
            if answer.status is None:
                return "refused", {}
            health = "ok" if answer.ok else str(answer.status)
            return health, await client.metrics()

    return probe
