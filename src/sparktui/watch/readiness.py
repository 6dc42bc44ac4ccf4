"""Readiness by progress: wait for a lane while its boot makes progress.

A lane is *ready* when its endpoint passes every stage in order: port open
-> ``/health`` 200 -> ``/v1/models`` lists a model -> (optionally) one short
streaming completion returns a first token; each stage's time since the
watch began is reported. It has *failed* on the first fatal line of any
rank's log, or when any rank's container exits (a worker's death is the
lane's death). It is *stalled* only when nothing has progressed for
``stall_after_s`` (see core/phases.py): progress is a progress log line of
any rank, a phase change, a readiness stage passed, or memory becoming
resident on a rank's node while it loads. There is no total timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from sparktui.adapters.engine_http import EngineClient
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.errors import RemoteError
from sparktui.core.logsig import Phase, container_exit
from sparktui.core.phases import Failure, MemoryProgress, PhaseTracker
from sparktui.core.probe import parse_probe
from sparktui.core.state import ContainerInfo
from sparktui.watch.follower import LogFollower, StreamSource, container_state, running_check

DOCKER_PS = "docker ps -a --no-trunc --format '{{json .}}'"
DISCOVER_TIMEOUT_S = 15.0
MEMINFO_TIMEOUT_S = 10.0
STAGES = ("port", "health", "models", "first token")


class Outcome(StrEnum):
    READY = "ready"
    FAILED = "failed"
    STALLED = "stalled"


class NodeLink(StreamSource, Protocol):
    """What the watch needs of a node connection (adapters/ssh.NodeConnection)."""

    async def run(self, cmd: str, timeout: float) -> object: ...


FATAL_GRACE_S = 0.05
"""Wall time the watch keeps applying lines after the first fatal one, so that
lines already in flight from other ranks are seen (kept well inside the
100 ms fatal-line-to-exit target)."""

@dataclass(frozen=True)
class RankContainer:
    """One rank of a lane, from its container's labels."""

    rank: int
    node: str
    container: str
    nranks: int
    port: int | None
    engine: str
    running: bool


@dataclass(frozen=True)
class WaitResult:
    lane: str
    outcome: Outcome
    stages: dict[str, float]
    """Seconds since the watch began at which each readiness stage passed."""
    phase_times: dict[Phase, float]
    failure: Failure | None
    last_progress: str
    summary: str


def lane_ranks(node: str, containers: Sequence[ContainerInfo], lane: str) -> list[RankContainer]:
    """The rank containers of ``lane`` among one node's containers."""
    out = []
    for c in containers:
        labels = c.labels
        if labels.get("sparktui.lane") != lane:
            continue
        try:
            rank = int(labels.get("sparktui.rank", ""))
            nranks = int(labels.get("sparktui.nranks", "1"))
        except ValueError:
            continue
        port_text = labels.get("sparktui.port", "")
        port = int(port_text) if port_text.isdigit() else None
        out.append(RankContainer(rank, node, c.name, nranks, port,
                                 labels.get("sparktui.engine", ""), c.running))
    return out


async def discover_lane(links: dict[str, NodeLink], lane: str) -> list[RankContainer]:
    """Find the lane's rank containers on every node (``docker ps`` on each,
    in parallel). Nodes that do not answer are skipped."""

    async def one(node: str, link: NodeLink) -> list[RankContainer]:
        result = await link.run(f"{DOCKER_PS} 2>&1", DISCOVER_TIMEOUT_S)
        text = getattr(result, "stdout", "")
        probe = parse_probe(f"@@containers\n{text}\n@@rc 0\n@@end\n")
        return lane_ranks(node, probe.containers, lane)

    found = await asyncio.gather(*(one(n, link) for n, link in links.items()),
                                 return_exceptions=True)
    ranks: dict[int, RankContainer] = {}
    for item in found:
        if isinstance(item, RemoteError):
            continue
        if isinstance(item, BaseException):
            raise item
        for rc in item:
            if rc.rank not in ranks or (rc.running and not ranks[rc.rank].running):
                ranks[rc.rank] = rc
    return [ranks[r] for r in sorted(ranks)]


@dataclass
class LaneWatch:
    """Watches one lane's boot until ready, failed or stalled."""

    lane: str
    ranks: list[RankContainer]
    links: dict[str, NodeLink]
    """Node name -> its connection."""
    api_host: str
    """Rank 0's api_host."""
    stall_after_s: float
    clock: Clock = field(default_factory=SystemClock)
    poll_s: float = 1.0
    first_token: bool = True
    tail: int | None = None
    """None: from the start of each container's log."""
    on_line: Callable[[int, str], Awaitable[None] | None] | None = None
    """Called for each log line (rank, raw line), e.g. to print it."""
    memory_poll_s: float = 10.0
    """How often the rank nodes' MemAvailable is read while loading."""
    on_memory: Callable[[str, int], None] | None = None
    """Called with (node, MemAvailable KiB) at each of those reads (OOM prediction)."""
    stop_when_ready: bool = True
    """False: keep watching a ready lane until it fails (or the task is cancelled)."""
    ready: bool = field(default=False, init=False)
    """The endpoint passed every readiness stage."""
    tracker: PhaseTracker = field(init=False)
    stages: dict[str, float] = field(default_factory=dict, init=False)
    _done: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _outcome: Outcome | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.tracker = PhaseTracker(self.lane, self.stall_after_s, self.clock.monotonic())
        self._fail_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int | None:
        rank0 = next((r for r in self.ranks if r.rank == 0), None)
        return rank0.port if rank0 else None

    async def run(self) -> WaitResult:
        tasks = [
            asyncio.create_task(self._follow(rc), name=f"wait-{rc.container}")
            for rc in self.ranks
        ]
        tasks.append(asyncio.create_task(self._stall_ticker(), name=f"stall-{self.lane}"))
        tasks.append(asyncio.create_task(self._memory_progress(), name=f"mem-{self.lane}"))
        if self.port is not None:
            tasks.append(asyncio.create_task(self._probe_endpoint(self.port),
                                             name=f"ready-{self.lane}"))
        try:
            waiter = asyncio.create_task(self._done.wait())
            pending = {waiter, *tasks}
            while not self._done.is_set():
                finished, pending = await asyncio.wait(
                    pending, return_when=asyncio.FIRST_COMPLETED)
                for t in finished:
                    if t is not waiter and not t.cancelled() and t.exception() is not None:
                        raise t.exception()  # type: ignore[misc]
                if not pending - {waiter} and not self._done.is_set():
                    # every follower ended without a verdict: nothing more can arrive
                    self._finish(Outcome.STALLED)
        finally:
            owned = [*tasks, waiter, *([self._fail_task] if self._fail_task else [])]
            for t in owned:
                t.cancel()
            await asyncio.gather(*owned, return_exceptions=True)
        return self.result()

    def result(self) -> WaitResult:
        tr = self.tracker
        assert self._outcome is not None
        return WaitResult(
            self.lane,
            self._outcome,
            dict(self.stages),
            tr.stage_seconds(),
            tr.failure,
            tr.last_progress,
            tr.summary(),
        )

    # ---- tasks -------------------------------------------------------------
    def _finish(self, outcome: Outcome) -> None:
        if self._outcome is None:
            self._outcome = outcome
            self._done.set()

    def _fail_soon(self) -> None:
        """Fail after FATAL_GRACE_S of wall time, during which the other ranks'
        lines already in flight are still applied (an earlier fatal line of
        another rank replaces the first one to arrive)."""
        if self._fail_task is None:
            self._fail_task = asyncio.create_task(self._fail_after_grace(),
                                                  name=f"fail-{self.lane}")

    async def _fail_after_grace(self) -> None:
        await asyncio.sleep(FATAL_GRACE_S)
        self._finish(Outcome.FAILED)

    async def _follow(self, rc: RankContainer) -> None:
        link = self.links[rc.node]
        follower = LogFollower.for_container(
            link, rc.container, rc.rank, follow=True, tail=self.tail,
            still_running=running_check(link, rc.container), clock=self.clock,
        )
        tr = self.tracker
        async for batch in follower.batches():
            now = self.clock.monotonic()
            for line in batch:
                tr.feed(rc.rank, line.text, now, line.ts)
                if self.on_line is not None:
                    maybe = self.on_line(rc.rank, line.raw)
                    if maybe is not None:
                        await maybe
            # the rest of the batch after a fatal line is fed too: it often
            # holds the root cause, at no cost in latency
            if tr.phase is Phase.FAILED:
                self._fail_soon()
                return
        # the container's log ended: the container stopped or died
        try:
            state = await container_state(link, rc.container)
        except RemoteError:
            state = None
        code = state.get("ExitCode") if state else None
        oom = bool(state.get("OOMKilled")) if state else False
        tr.feed_event(rc.rank, container_exit(code if isinstance(code, int) else -1, oom),
                      self.clock.monotonic())
        self._fail_soon()

    async def _stall_ticker(self) -> None:
        while True:
            await self.clock.sleep(self.poll_s)
            if self.tracker.check_stall(self.clock.monotonic()):
                self._finish(Outcome.STALLED)
                return

    async def _memory_progress(self) -> None:
        nodes = sorted({r.node for r in self.ranks})
        memory = MemoryProgress()
        while self.tracker.phase not in (Phase.SERVING, Phase.FAILED):
            for node in nodes:
                avail = await self._mem_available(node)
                if avail is not None and self.on_memory is not None:
                    self.on_memory(node, avail)
                note = memory.observe(node, avail) if avail is not None else None
                if note is not None:
                    self.tracker.note_progress(note, self.clock.monotonic())
            await self.clock.sleep(self.memory_poll_s)

    async def _mem_available(self, node: str) -> int | None:
        try:
            result = await self.links[node].run("cat /proc/meminfo", MEMINFO_TIMEOUT_S)
        except RemoteError:
            return None
        text = getattr(result, "stdout", "")
        mem = parse_probe(f"@@meminfo\n{text}\n@@rc 0\n@@end\n").meminfo
        return mem.available_kib if mem else None

    async def _probe_endpoint(self, port: int) -> None:
        wanted = list(STAGES if self.first_token else STAGES[:-1])
        async with EngineClient(self.api_host, port) as client:
            model = ""
            while wanted:
                stage = wanted[0]
                passed = False
                if stage == "port":
                    passed = await client.port_open()
                elif stage == "health":
                    passed = (await client.health()).ok
                elif stage == "models":
                    models = await client.models()
                    model, passed = (models[0], True) if models else ("", False)
                else:
                    passed = await client.first_token(model) is not None
                if passed:
                    now = self.clock.monotonic()
                    self.stages[stage] = now - self.tracker.start
                    self.tracker.note_progress(f"endpoint: {stage} passed", now)
                    wanted.pop(0)
                    continue
                if stage != "port" and not await client.port_open():
                    # the server went away (engine death closes the port):
                    # start over; the log says why
                    wanted = list(STAGES if self.first_token else STAGES[:-1])
                    self.stages.clear()
                await self.clock.sleep(self.poll_s)
        self.ready = True
        self.tracker.mark_serving(self.clock.monotonic())
        if self.stop_when_ready:
            self._finish(Outcome.READY)

