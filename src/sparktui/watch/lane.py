"""The one lane watcher: follows every rank of a lane once and tells its
subscribers what happens (phase, progress, lines, fatal, exit, endpoint).

Readiness (`sparktui wait`, the serve workflow) and the console consume the
same watcher; a serve started from the console shares the console's watcher
through :class:`LaneWatchers`, so no rank is followed twice.

- **Fatal, decided right.** Ranks' streams arrive with different lags (a
  `docker logs -f` that started 0.4 s later). The first fatal line seen is
  only a candidate; the lane's failure is decided once every rank's log has
  been read past the candidate's time (its stream delivered a later line, or
  ended, or a one-shot catch-up read returned what the log holds up to now).
  An earlier fatal line of another rank found meanwhile replaces the
  candidate; "earlier" is by the engines' own stamps where both lines have
  one (core/enginetime.py), by docker's otherwise. The failure keeps the
  rank's root-cause line (the exception line after a traceback), read to the
  end of the rank's log at decision time.
- **Container exit is a failure** (timestamped by docker's FinishedAt).
- **Stalled** only when nothing progressed for ``stall_after_s``, in every
  phase until the endpoint is confirmed (core/phases.py). Progress: log
  progress lines, phase changes, endpoint stages, memory becoming resident
  and bytes read by a rank's engine processes (their ``/proc/<pid>/io``;
  the node's disk and NFS counters when they cannot be read), for the
  console's watchers too (their memory comes from the poller, their I/O
  from a read every ``io_poll_s``).
- **Serving** only when the endpoint proves to be this lane's
  (watch/readiness.py), and only after this lane's log reached the API phase.
- **Stopped, not failed**: once told the lane is being stopped by us
  (:meth:`LaneWatcher.stopping`, through :meth:`LaneWatchers.stopping`), an
  exit or a fatal line stamped after that moment is the stop's doing: the
  lane ends "stopped". Whatever happened before it still counts. A stop by
  another process (``sparktui stop`` from a shell while the console watches)
  is learnt from ``stop_intent`` (ops/stop_intents.py: the journal's stop
  intents, on disk before the first ``docker stop``), asked before each batch
  of lines is read, before an exit is taken for a failure, and every tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sparktui.adapters.engine_http import EngineClient, HealthAnswer
from sparktui.core.canary import NO_ANSWER, REFUSED, endpoint_gone
from sparktui.core.clock import Clock, within
from sparktui.core.errors import RemoteError
from sparktui.core.logsig import (
    Kind,
    LogEvent,
    Phase,
    Severity,
    classify,
    container_exit,
    parse_timestamp,
)
from sparktui.core.phases import GENERIC_FATAL, Failure, MemoryProgress, PhaseTracker
from sparktui.core.probe import builtin_cat, builtin_cat_word, parse_section
from sparktui.core.state import NodeSnapshot
from sparktui.watch.follower import (
    CATCH_UP_TIMEOUT_S,
    CommandRunner,
    LogFollower,
    LogLine,
    running_check,
)
from sparktui.watch.readiness import (
    STAGES,
    NodeLink,
    Outcome,
    RankContainer,
    WaitResult,
    inspect_container,
    port_holders,
)

log = logging.getLogger(__name__)

LOG_BUFFER_LINES = 5000
"""Lines kept per rank for the console; older ones are dropped."""
FEED_SLICE = 64
"""Lines classified between two yields to the event loop during a burst."""
ENGINE_TIMEOUT_S = 3.0
RECHECK_S = 1.0
"""After an endpoint check whose ``/health`` said the server is gone (503,
refused), the next comes this soon: an exited engine is failed within
``endpoint_every_s`` + this of its death, not two whole check intervals."""
ECHO_READS = 3
"""Reads of the rank-0 log for the tag of a ``/v1/models`` request before the
start-time fallback and the port's owner are asked."""
START_SKEW_S = 2.0
"""Clock skew allowed between the server's start time and its container's."""
RESOURCE_TIMEOUT_S = 10.0
IO_PROGRESS_BYTES = 256 * 1024 * 1024
"""This many more bytes read by a rank's engine (or, when its processes
cannot be read, on its node from disk or NFS) is load progress."""
IO_POLL_S = 60.0
"""How often a watcher whose memory comes from the console's poller reads
the ranks' I/O (a 900 s stall window needs far less)."""
NODE_IO_READ = f"{builtin_cat('/proc/diskstats')}; {builtin_cat('/proc/self/mountstats')}"
"""Block-device sectors read and NFS bytes read on a node (page-cache reads
of a sparse shard show in no MemAvailable change, only here)."""
MEMORY_READ = builtin_cat("/proc/meminfo")
"""MemAvailable, for a boot whose watcher reads memory itself (the CLI's
serve and wait; the console's watchers take it from the poller)."""


class Verdict(StrEnum):
    READY = "ready"
    FAILED = "failed"
    STALLED = "stalled"
    STOPPED = "stopped"


@dataclass(frozen=True)
class LaneEvent:
    lane: str


@dataclass(frozen=True)
class PhaseChanged(LaneEvent):
    phase: Phase
    summary: str


@dataclass(frozen=True)
class LinesArrived(LaneEvent):
    rank: int
    node: str
    lines: tuple[LogLine, ...]
    events: tuple[LogEvent | None, ...]
    """What each line means (core/logsig), classified once for every consumer."""
    delivered: int
    """Lines of that rank delivered so far (the console's buffer index)."""


@dataclass(frozen=True)
class FatalDecided(LaneEvent):
    failure: Failure


@dataclass(frozen=True)
class RankExited(LaneEvent):
    rank: int
    node: str
    exit_code: int | None
    oom_killed: bool


@dataclass(frozen=True)
class MemoryRead(LaneEvent):
    """MemAvailable of a rank's node while the lane boots (OOM prediction)."""

    node: str
    available_kib: int


@dataclass(frozen=True)
class EndpointChecked(LaneEvent):
    health: str
    decode_tps: float | None
    metrics: Mapping[str, float]
    """The engine's ``/metrics`` samples (empty when it did not answer)."""


@dataclass(frozen=True)
class Stopping(LaneEvent):
    """The lane is being stopped by us (``ended``: every rank has exited)."""

    ended: bool


@dataclass(frozen=True)
class WatchEnded(LaneEvent):
    result: WaitResult


Subscriber = Callable[[LaneEvent], None]
StopIntent = Callable[[Sequence[str]], bool]
"""(the lane's containers, the boot's start) -> when a stop of one of them
was journaled since, by any process; None when none was."""


EXIT_POLL_S = 0.005
"""How often the fatal decision looks whether a rank's pending exit is known."""


@dataclass
class _RankState:
    rc: RankContainer
    follower: LogFollower | None = None
    fed_time: float | None = None
    """Epoch seconds of the last line fed to the tracker."""
    busy: bool = False
    """A batch is being fed (its lines are not all in the tracker yet)."""
    ended: bool = False
    unreadable: str = ""
    pid: int | None = None
    """The container's main process on its node (for its engine's I/O)."""


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


class LaneWatcher:
    """Watches one lane: :meth:`start`, then :meth:`verdict` (readiness) or
    events (the console); :meth:`stop` cancels every task it started."""

    def __init__(
        self,
        lane: str,
        ranks: Sequence[RankContainer],
        links: Mapping[str, NodeLink],
        api_host: str,
        *,
        stall_after_s: float,
        clock: Clock,
        poll_s: float = 1.0,
        first_token: bool = True,
        tail: int | None = None,
        resource_poll_s: float | None = 10.0,
        endpoint_every_s: float = 5.0,
        follow: bool = True,
        probe_endpoint: bool = True,
        io_poll_s: float | None = IO_POLL_S,
        stop_intent: StopIntent | None = None,
    ) -> None:
        """``resource_poll_s`` None: memory comes from :meth:`on_snapshot`
        (the console's poller) instead of the watcher's own reads.
        ``follow`` False: each rank's log is read to its current end once (a
        rank still running then is not an exit). ``probe_endpoint`` False:
        the lane's endpoint is never asked (a log viewer sends no request).
        ``io_poll_s``: how often the ranks' I/O is read when the memory comes
        from the poller (None: never; with own memory reads, I/O comes with them).
        ``stop_intent``: stops journaled by other processes (see the module doc)."""
        self.lane = lane
        self.ranks = tuple(ranks)
        self.links = links
        self.api_host = api_host
        self.clock = clock
        self.poll_s = poll_s
        self.first_token = first_token
        self.tail = tail
        self.resource_poll_s = resource_poll_s
        self.io_poll_s = io_poll_s
        self.endpoint_every_s = endpoint_every_s
        self.follow = follow
        self.probe_endpoint = probe_endpoint
        self.stop_intent = stop_intent
        self._latest_seen: float | None = None
        self._stop_journaled = False
        """The stop was learnt from the journal (another process's `stop`)."""
        """The latest line or container time read of this boot, on the
        containers' own clock (a stop learnt from the journal starts there:
        the journal's clock is never compared with the containers')."""
        self.tracker = PhaseTracker(lane, stall_after_s, clock.monotonic())
        self.created_at = clock.time()
        self.ended_at: float | None = None
        """When (this process's clock) the last rank exit was taken."""
        self.stages: dict[str, float] = {}
        self.buffers: dict[int, deque[LogLine]] = {}
        self.delivered: dict[int, int] = {}
        self.health = "—"
        self.decode_tps: float | None = None
        self._subscribers: list[Subscriber] = []
        self._ranks: dict[int, _RankState] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopped = False
        self._result: WaitResult | None = None
        self._verdict = asyncio.Event()
        self._decided: Failure | None = None
        self._phase: Phase | None = None
        self._memory = MemoryProgress()
        self._io: dict[str, int] = {}
        self._io_unreadable: set[str] = set()
        self._engines: dict[str, bool] = {}
        """Per node: whether its ranks' engines' I/O counters answered (not
        asked again where they did not; the node's own counters not read
        where they did); absent until they were asked."""
        self._tags: set[str] = set()
        self._echoed: set[str] = set()
        self._last_tokens: tuple[float, float] | None = None
        self._gone_checks = 0
        """Endpoint checks in a row (while serving) that said the server is gone."""
        self._unread: list[str] = []
        self._port_taken = ""
        self.stopping_since: float | None = None
        """Epoch seconds when we began stopping the lane (None: not stopping)."""
        self.stopped = False
        """Every rank exited after our stop."""

    # -- subscribers ---------------------------------------------------------

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Events from now on go to ``fn`` too; returns the unsubscribe."""
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def _emit(self, event: LaneEvent) -> None:
        for fn in list(self._subscribers):
            try:
                fn(event)
            except Exception:  # a broken consumer must not stop the watch
                log.exception("lane %s: subscriber failed on %r", self.lane, event)

    # -- lifecycle -----------------------------------------------------------

    @property
    def port(self) -> int | None:
        rank0 = next((r for r in self.ranks if r.rank == 0), None)
        return rank0.port if rank0 else None

    @property
    def ready(self) -> bool:
        return self.tracker.ready

    def start(self) -> None:
        for rc in self.ranks:
            self._follow(rc)
        self._spawn("ticker", self._ticker)
        if self.resource_poll_s is not None or self.io_poll_s is not None:
            self._spawn("resources", self._resources)
        if self.probe_endpoint and (port := self.port) is not None:
            self._spawn("endpoint", lambda: self._endpoint(port))

    def update_ranks(self, ranks: Sequence[RankContainer]) -> None:
        """Ranks seen in a newer snapshot: a new container gets its follower."""
        self.ranks = tuple(ranks)
        for rc in self.ranks:
            self._follow(rc)

    async def stop(self) -> None:
        """Cancel every task of the watch. Nothing is spawned after this (a
        rank read being cancelled must not start a new decision), so one
        drain ends them all."""
        self._stopped = True
        tasks, self._tasks = list(self._tasks.values()), {}
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def verdict(self) -> WaitResult:
        """The first verdict: ready, failed or stalled. A watcher task that
        crashed raises here instead of leaving the wait hanging."""
        waiter = asyncio.create_task(self._verdict.wait())
        try:
            while not waiter.done():
                tasks = [t for t in self._tasks.values() if not t.done()]
                await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
                for t in tasks:
                    if t.done() and not t.cancelled() and t.exception() is not None:
                        raise t.exception()  # type: ignore[misc]
                if not waiter.done() and not any(not t.done() for t in self._tasks.values()):
                    # every task ended without a verdict: nothing more can arrive
                    self._finish(Verdict.STALLED)
        finally:
            waiter.cancel()
        assert self._result is not None
        return self._result

    def stopping(self, since: float | None = None) -> None:
        """We are stopping the lane (the stop workflow says so before its
        first ``docker stop``): exits and fatal lines from now on (or from
        ``since``, epoch seconds) are ours."""
        if self.stopping_since is not None or self._stopped:
            return
        self.stopping_since = self.clock.time() if since is None else since
        if (endpoint := self._tasks.get("endpoint")) is not None:
            endpoint.cancel()  # a lane going down is not probed (stop() reaps it)
        self._emit(Stopping(self.lane, False))
        self._stop_seen()

    def _learn_stop(self, seen: float | None = None) -> None:
        """Is another process stopping the lane? A live stop intent journaled
        after this boot's containers were started (ops/stop_intents.py: matched
        by container and journal order, not by time) makes the lane stopping
        from the latest moment read of this boot (``seen``: a time of this boot
        just read, on the containers' clock): what was read before still counts."""
        if seen is not None:
            self._latest_seen = seen if self._latest_seen is None else max(self._latest_seen,
                                                                           seen)
        if self.stop_intent is None or self.stopping_since is not None or self._stopped:
            return
        if self.stop_intent([r.container for r in self.ranks]):
            self._stop_journaled = True
            self.stopping(self._latest_seen if self._latest_seen is not None
                          else float("-inf"))

    def ended_before(self, ranks: Sequence[RankContainer], taken_at: float) -> bool:
        """Every rank of this watch's boot exited and ``ranks``, of a snapshot
        taken after that (``taken_at``, this process's clock), run again under
        the same names: a new boot, which must start from a clean watcher (this
        one's stop and verdict are the old boot's)."""
        return self.ended_at is not None and taken_at > self.ended_at \
            and all(st.ended for st in self._ranks.values()) and any(r.running for r in ranks)

    def _exit_ours(self, finished: str | None) -> bool:
        """Is a rank's exit our stop's? Any exit once a journaled stop of this
        boot's containers is known: that stop takes workers first, so a worker
        can exit before the latest line read of the head (the moment the stop
        was learnt from), and times on two nodes' logs do not order it."""
        return self._stop_journaled or self._ours(finished)

    def _ours(self, timestamp: str | None) -> bool:
        """Did this (a line's or an exit's time) happen after our stop began?"""
        if self.stopping_since is None:
            return False
        t = parse_timestamp(timestamp)
        return t is None or t >= self.stopping_since

    def _stop_seen(self) -> None:
        """Every rank gone after our stop: the lane is stopped."""
        if self.stopping_since is None or self.stopped or self._decided is not None \
                or not all(st.ended for st in self._ranks.values()):
            return
        self.stopped = True
        self._emit(Stopping(self.lane, True))
        self._finish(Verdict.STOPPED, {st.rc.rank: "stopped" for st in self._ranks.values()})

    async def settled(self, rank: int | None = None) -> None:
        """Until the reads of every rank (or of ``rank``) end -- a one-shot
        read reached the log's end, a followed container exited -- and then
        until a fatal decision under way is made."""
        keys = [k for k in self._tasks if k.startswith("rank:")
                and (rank is None or k.split(":")[1] == str(rank))]
        await asyncio.gather(*(self._tasks[k] for k in keys))
        if (decide := self._tasks.get("decide")) is not None:
            await decide

    async def run(self) -> WaitResult:
        """Start, wait for the verdict, stop (for a watch of its own)."""
        self.start()
        try:
            return await self.verdict()
        finally:
            await self.stop()

    def _spawn(self, key: str, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        if not self._stopped and key not in self._tasks:
            self._tasks[key] = asyncio.create_task(make(), name=f"lane:{self.lane}:{key}")

    def _follow(self, rc: RankContainer) -> None:
        key = f"rank:{rc.rank}:{rc.container}"
        if key in self._tasks or rc.node not in self.links:
            return
        self.buffers.setdefault(rc.rank, deque(maxlen=LOG_BUFFER_LINES))
        self._ranks[rc.rank] = _RankState(rc)
        st = self._ranks[rc.rank]
        self._spawn(key, lambda: self._follow_rank(st))
        if self.follow:
            self._spawn(f"reader:{rc.node}", lambda: self._open_reader(rc.node))

    async def _open_reader(self, node: str) -> None:
        """The node's reader shell (:func:`reader`) opened as the watch
        starts: a fatal line's catch-up reads then pay no session setup (it
        was most of fatal line -> verdict over a real sshd when the shell was
        opened by the first read)."""
        opener = getattr(self.links[node], "open_reader", None)
        if opener is None:
            return
        try:
            await opener()
        except RemoteError as exc:  # the first read tries again and says why
            log.debug("lane %s: reader shell on %s not opened: %s", self.lane, node, exc)

    # -- verdicts ------------------------------------------------------------

    def _finish(self, verdict: Verdict, ranks: dict[int, str] | None = None) -> None:
        if self._result is not None:
            return
        tr = self.tracker
        self._result = WaitResult(
            self.lane, Outcome(verdict.value), dict(self.stages), tr.stage_seconds(),
            tr.failure, tr.last_progress, tr.summary(), ranks or {}, tuple(self._unread),
            self._port_taken)
        self._verdict.set()
        self._emit(WatchEnded(self.lane, self._result))

    def _phase_changed(self) -> None:
        phase = self.tracker.phase
        if phase is not self._phase and phase is not Phase.FAILED:
            self._phase = phase
            self._emit(PhaseChanged(self.lane, phase, self.tracker.summary()))

    async def _rank_states(self) -> dict[int, str]:
        async def one(rc: RankContainer) -> tuple[int, str]:
            facts = await inspect_container(self.links[rc.node], rc.container)
            if facts is None:
                return rc.rank, "unknown"
            if facts.running:
                return rc.rank, "running"
            return rc.rank, f"exited ({facts.exit_code})"

        pairs = await asyncio.gather(*(one(rc) for rc in self.ranks if rc.node in self.links))
        return dict(pairs)

    # -- following -----------------------------------------------------------

    async def _follow_rank(self, st: _RankState) -> None:
        rc = st.rc
        link = self.links[rc.node]
        follower = LogFollower.for_container(
            link, rc.container, rc.rank, follow=self.follow, tail=self.tail,
            still_running=running_check(link, rc.container) if self.follow else None,
            clock=self.clock)
        st.follower = follower
        async for batch in follower.batches():
            await self._ingest(st, batch)
        # the log was read to its end: an exit when the container stopped
        facts = await inspect_container(link, rc.container)
        if not self.follow and (facts is None or facts.running):
            return  # read once while it runs (or cannot tell): not an exit
        code = facts.exit_code if facts else None
        oom = facts.oom_killed if facts else False
        self._learn_stop(facts.started if facts else None)
        st.ended = True
        self.ended_at = self.clock.time()
        self._emit(RankExited(self.lane, rc.rank, rc.node, code, oom))
        if self._exit_ours(facts.finished if facts else None):
            self._stop_seen()
            return
        self.tracker.feed_event(rc.rank, container_exit(code if code is not None else -1, oom),
                                self.clock.monotonic(), facts.finished if facts else None)
        self._after_feed()

    async def _ingest(self, st: _RankState, batch: Sequence[LogLine]) -> None:
        rank = st.rc.rank
        tr = self.tracker
        st.busy = True
        events: list[LogEvent | None] = []
        if self.stop_intent is not None and batch:
            self._learn_stop(parse_timestamp(batch[0].ts))
        try:
            now = self.clock.monotonic()
            for at in range(0, len(batch), FEED_SLICE):
                part = batch[at:at + FEED_SLICE]
                if self.stopping_since is None:  # no line is our stop's (_ours): fed at once
                    events += tr.feed_lines(rank, part, now)
                else:
                    for line in part:
                        # a line written after our stop began is the shutdown's, not the boot's
                        events.append(classify(line.text) if self._ours(line.ts)
                                      else tr.feed(rank, line.text, now, line.ts))
                if self._tags and rank == 0:
                    for line in part:
                        for tag in self._tags:
                            if tag in line.text:
                                self._echoed.add(tag)
                if len(part) == FEED_SLICE:
                    await asyncio.sleep(0)  # a burst must not hold the loop
            if batch and (t := batch[-1].ts) is not None:
                st.fed_time = parse_timestamp(t) or st.fed_time
        finally:
            st.busy = False
        self.buffers.setdefault(rank, deque(maxlen=LOG_BUFFER_LINES)).extend(batch)
        end = self.delivered[rank] = self.delivered.get(rank, 0) + len(batch)
        self._emit(LinesArrived(self.lane, rank, st.rc.node, tuple(batch), tuple(events), end))
        self._after_feed()

    def _after_feed(self) -> None:
        self._phase_changed()
        if self.tracker.failure is not None and self._decided is None:
            self._spawn("decide", self._decide)

    # -- the fatal decision --------------------------------------------------

    def _exit_pending(self, st: _RankState) -> bool:
        """A followed rank's log ended and its exit is being read (the bounded
        inspect after the stream): a remote rank SIGKILLed before the head's
        NCCL error died first, and only its exit says so."""
        return self.follow and st.follower is not None and st.follower.ended and not st.ended

    def _caught_up(self, st: _RankState, at: float | None) -> bool:
        if st.busy or self._exit_pending(st):
            return False
        if st.ended or st.unreadable or (st.follower is not None and st.follower.ended):
            return True
        return at is not None and st.fed_time is not None and st.fed_time >= at

    async def _decide(self) -> None:
        """Decide the lane's failure once every rank's log is read past the
        candidate's time; an earlier fatal line found meanwhile replaces it.
        Beside it, the head node is asked whether another lane holds the port."""
        holders = asyncio.create_task(self._port_holders())
        try:
            await self._read_past_failure()
            failure = self.tracker.failure
            assert failure is not None
            self._decided = failure
            self._emit(FatalDecided(self.lane, failure))
            self._port_taken = await holders
        finally:
            holders.cancel()
        self._finish(Verdict.FAILED, {st.rc.rank: "exited" for st in self._ranks.values()
                                      if st.ended})

    async def _read_past_failure(self) -> None:
        read_once: set[int] = set()
        while True:
            f = self.tracker.failure
            assert f is not None
            at = f.read_past()
            behind = [st for st in self._ranks.values() if not self._caught_up(st, at)]
            # a generic fatal line (EngineDead, a worker died) says that, not why: the
            # failing rank is read to its end too, its root cause follows the line
            if f.cause is None and f.kind in GENERIC_FATAL and f.rank not in read_once:
                rank_st = self._ranks.get(f.rank)
                if rank_st is not None and rank_st not in behind and not rank_st.ended:
                    behind.append(rank_st)
            behind = [st for st in behind
                      if st.rc.rank not in read_once or st.busy or self._exit_pending(st)]
            if not behind:
                if self.tracker.failure is f:
                    return
                continue
            if any(self._exit_pending(st) for st in behind):
                await asyncio.sleep(EXIT_POLL_S)  # the inspect is bounded (INSPECT_TIMEOUT_S)
                continue
            if any(st.busy for st in behind):
                await asyncio.sleep(0)
                continue
            read_once.update(st.rc.rank for st in behind)
            await asyncio.gather(*(self._catch_up(st) for st in behind))

    async def _port_holders(self) -> str:
        rank0 = next((r for r in self.ranks if r.rank == 0), None)
        if rank0 is None or rank0.port is None or rank0.node not in self.links:
            return ""
        holders = await port_holders(self.links[rank0.node], rank0.port, self.lane)
        return (f"port {rank0.port} on {rank0.node} answered by lane {', '.join(holders)}"
                if holders else "")

    async def _catch_up(self, st: _RankState) -> None:
        if st.follower is None:
            st.unreadable = "not followed yet"
            self._unread.append(f"rank {st.rc.rank}: its log was not followed yet")
            return
        try:
            lines = await self._bounded_catch_up(st.follower, st.rc.node)
        except RemoteError as exc:
            st.unreadable = exc.message
            self._unread.append(f"rank {st.rc.rank} ({st.rc.node}): {exc.message}")
            return
        if lines:
            await self._ingest(st, lines)
        st.fed_time = max(st.fed_time or 0.0, self.clock.time())
        if self.follow and not st.ended:
            # a rank read to its end may be one that died before the candidate (a
            # remote rank SIGKILLed, the head's NCCL error after): its exit says so
            # before its follower has noticed the end of its stream
            facts = await inspect_container(self.links[st.rc.node], st.rc.container)
            if facts is not None and not facts.running:
                self._learn_stop(facts.started)  # a stop's exit is the stop's, not a death
            if facts is not None and not facts.running and not self._exit_ours(facts.finished):
                code = facts.exit_code if facts.exit_code is not None else -1
                self.tracker.feed_event(st.rc.rank, container_exit(code, facts.oom_killed),
                                        self.clock.monotonic(), facts.finished)

    async def _bounded_catch_up(self, follower: LogFollower, node: str) -> list[LogLine]:
        """A catch-up read bounded on the watcher's own clock: a starved node
        must not hold the lane's verdict (its rank counts as unreadable), and
        under the simulator's clock the bound is simulated time, as the rest
        of the watch is."""
        try:
            return await within(self.clock, CATCH_UP_TIMEOUT_S,
                                follower.catch_up(reader(self.links[node])))
        except TimeoutError:
            raise RemoteError(node, "docker logs --since (catch-up)",
                              f"no answer within {CATCH_UP_TIMEOUT_S:g} s") from None

    # -- stall, memory and I/O -----------------------------------------------

    async def _ticker(self) -> None:
        while True:
            await self.clock.sleep(self.poll_s)
            was = self.tracker.phase
            self._learn_stop()
            if self.stopping_since is not None:
                continue  # a lane going down makes no progress: that is no stall
            if self.tracker.check_stall(self.clock.monotonic()) and was is not Phase.STALLED:
                self._phase_changed()
                if self._result is None:
                    self._finish(Verdict.STALLED, await self._rank_states())

    def on_snapshot(self, snap: NodeSnapshot) -> None:
        """A poll of one node (the console's poller): memory filling on a
        rank's node is load progress. Ignored while the watcher reads the
        nodes itself (one source of memory readings, not two)."""
        if self.resource_poll_s is not None or self.tracker.done \
                or all(rc.node != snap.node for rc in self.ranks):
            return
        mem = snap.probe.meminfo if snap.probe is not None else None
        if mem is not None:
            self._emit(MemoryRead(self.lane, snap.node, mem.available_kib))
            self._note(self._memory.observe(snap.node, mem.available_kib))

    def _note(self, note: str | None) -> None:
        if note is not None:
            self.tracker.note_progress(note, self.clock.monotonic())
            self._phase_changed()

    async def _resources(self) -> None:
        """While the lane boots: each rank node's memory (unless the poller
        gives it) and the bytes its ranks' engines read."""
        own_memory = self.resource_poll_s is not None
        period = self.resource_poll_s if own_memory else self.io_poll_s
        assert period is not None
        while not self.tracker.done:
            for node in sorted({r.node for r in self.ranks if r.node in self.links}):
                await self._read_node(node, own_memory)
            await self.clock.sleep(period)

    async def _read_node(self, node: str, own_memory: bool) -> None:
        """One command on ``node`` (:func:`resource_command`): its memory
        (``own_memory``), the bytes its ranks' engines read and the bytes read
        on the node, each part only while it can be read there."""
        link = self.links[node]
        ranks = [st for st in self._ranks.values() if st.rc.node == node and not st.ended]
        pids: dict[int, int] = {}
        if self._engines.get(node, True):
            for st in ranks:
                if st.pid is None and (facts := await inspect_container(link, st.rc.container)):
                    st.pid = facts.pid
            pids = {st.pid: st.rc.rank for st in ranks if st.pid is not None}
        node_io = node not in self._io_unreadable and not (pids and self._engines.get(node))
        if not (own_memory or pids or node_io):
            return
        text = await self._run(link, resource_command(own_memory, sorted(pids), node_io))
        if text is None:
            return
        parts = resource_parts(text)
        if own_memory and (
                mem := parse_section("meminfo", parts.get("meminfo", "")).meminfo) is not None:
            self._emit(MemoryRead(self.lane, node, mem.available_kib))
            self._note(self._memory.observe(node, mem.available_kib))
        engines = engine_read_bytes(parts.get("engines", "")) if pids else {}
        if pids:  # none read: another user's processes, another shell
            self._engines[node] = bool(engines)
        for pid, read in engines.items():
            if pid in pids:
                self._note(self._io_progress(f"rank {pids[pid]} ({node})", read,
                                             "read by its engine"))
        if engines or not node_io:
            return
        total = read_bytes(parts.get("io", ""))
        if total is None:
            self._io_unreadable.add(node)  # no counter at all there: not asked again
        self._note(self._io_progress(node, total, "read from disk/NFS"))

    async def _run(self, link: NodeLink, cmd: str) -> str | None:
        """A resource read, in the node's reader shell: every 10 s on every
        rank node of a boot, an exec channel each was a session setup (a login
        shell forked by sshd) on nodes whose memory is filling."""
        try:
            return str(getattr(await reader(link).run(cmd, RESOURCE_TIMEOUT_S), "stdout", ""))
        except RemoteError:
            return None

    def _io_progress(self, who: str, total: int | None, how: str) -> str | None:
        if total is None:
            return None
        before = self._io.get(who)
        if before is None or total < before:
            self._io[who] = total
            return None
        if total - before < IO_PROGRESS_BYTES:
            return None
        self._io[who] = total
        return f"{who}: {(total - before) / 2**30:.1f} GiB more {how}"

    # -- the endpoint --------------------------------------------------------

    def _api_reached(self) -> bool:
        times = self.tracker.phase_times
        return Phase.API_STARTING in times or Phase.SERVING in times

    async def _endpoint(self, port: int) -> None:
        while not self._api_reached():
            await self.clock.sleep(self.poll_s)
        rank0 = next(r for r in self.ranks if r.rank == 0)
        wanted = list(STAGES if self.first_token else STAGES[:-1])
        async with EngineClient(self.api_host, port, timeout=ENGINE_TIMEOUT_S) as client:
            model = ""
            while wanted:
                if self.tracker.failure is not None:
                    return  # the log or the identity check said why
                stage = wanted[0]
                if stage == "port":
                    passed = await client.port_open()
                elif stage == "health":
                    passed = (await client.health()).ok
                elif stage == "models":
                    model = await self._identity(client, rank0, port)
                    if self.tracker.failure is not None:
                        return
                    passed = bool(model)
                else:
                    passed = await client.first_token(model) is not None
                if passed:
                    now = self.clock.monotonic()
                    self.stages[stage] = now - self.tracker.start
                    self.tracker.note_progress(f"endpoint: {stage} passed", now)
                    wanted.pop(0)
                    continue
                if stage != "port" and not await client.port_open():
                    wanted = list(STAGES if self.first_token else STAGES[:-1])
                    self.stages.clear()
                await self.clock.sleep(self.poll_s)
            self.tracker.mark_serving(self.clock.monotonic())
            self._phase_changed()
            self._finish(Verdict.READY)
            while True:
                await self.clock.sleep(RECHECK_S if self._gone_checks else self.endpoint_every_s)
                await self._check(client)

    async def _identity(self, client: EngineClient, rank0: RankContainer, port: int) -> str:
        """The model this lane serves when the answering server proves to be
        this lane's; "" while it cannot tell yet. A server that is not this
        lane's fails the lane (through the tracker)."""
        link = self.links[rank0.node]
        facts = await inspect_container(link, rank0.container)
        if facts is None or not facts.running:
            return ""  # its exit reaches the tracker through the follower
        tag = secrets.token_hex(6)
        self._tags.add(tag)
        try:
            models = await client.models(tag)
            if not models:
                return ""
            mine = [m for m in models if m in facts.served_models] if facts.served_models \
                else models
            if not mine:
                await self._not_ours(link, port, f"/v1/models lists {', '.join(models)}, not "
                                     f"{', '.join(facts.served_models)}")
                return ""
            if await self._echo(tag, rank0.rank):
                return mine[0]
            start = (await client.metrics()).get("process_start_time_seconds")
            if start is not None and facts.started is not None:
                if start >= facts.started - START_SKEW_S:
                    return mine[0]
                await self._not_ours(link, port, "the server started before this lane's "
                                     "container")
                return ""
            holders = await port_holders(link, port, self.lane)
            if holders:
                await self._not_ours(link, port, "")
            return ""
        finally:
            self._tags.discard(tag)

    async def _echo(self, tag: str, rank: int) -> bool:
        """Did the request tagged ``tag`` show up in the rank's log? The log
        is read to "now" (a one-shot read beside the live stream) a few times,
        so a slow stream cannot make the lane's own server look foreign."""
        st = self._ranks.get(rank)
        for _ in range(ECHO_READS):
            if tag in self._echoed:
                return True
            if st is not None and st.follower is not None and not st.busy:
                try:
                    lines = await st.follower.catch_up(reader(self.links[st.rc.node]))
                except RemoteError:
                    lines = []
                if lines:
                    await self._ingest(st, lines)
            if tag in self._echoed:
                return True
            await self.clock.sleep(min(self.poll_s, 0.5))
        return False

    async def _not_ours(self, link: NodeLink, port: int, why: str) -> None:
        holders = await port_holders(link, port, self.lane)
        who = f"lane {', '.join(holders)}" if holders else "a server that is not this lane's"
        text = f"port {port} answered by {who}" + (f" ({why})" if why else "")
        ev = LogEvent(Kind.PORT_TAKEN, Severity.FATAL, Phase.FAILED, {"port": str(port)}, text)
        self.tracker.feed_event(0, ev, self.clock.monotonic(), _rfc3339(self.clock.time()))
        self._after_feed()

    async def _check(self, client: EngineClient) -> None:
        """Health and decode rate of a serving lane (the console shows them);
        a server that is gone fails the lane (:meth:`_judge_endpoint`)."""
        answer = await client.health()
        self.health = health_word(answer)
        metrics: dict[str, float] = {}
        if answer.status is not None:
            metrics = await client.metrics()
            tokens = metrics.get("vllm:generation_tokens_total",
                                 metrics.get("sglang:generation_tokens_total"))
            now = self.clock.monotonic()
            if tokens is not None:
                if self._last_tokens is not None and now > self._last_tokens[0]:
                    self.decode_tps = max(0.0, (tokens - self._last_tokens[1])
                                          / (now - self._last_tokens[0]))
                self._last_tokens = (now, tokens)
        self._emit(EndpointChecked(self.lane, self.health, self.decode_tps, metrics))
        await self._judge_endpoint()

    async def _judge_endpoint(self) -> None:
        """A serving lane whose ``/health`` says its server is gone
        (core/canary.endpoint_gone: 503, refused) has failed. What its ranks'
        logs and exits hold up to now comes first (read to their end): a
        fatal line or a rank's exit there is the failure, with its cause;
        only when they hold none is the endpoint's word the failure."""
        self._learn_stop()
        if self.tracker.failure is not None or self.stopping_since is not None \
                or self.tracker.phase is not Phase.SERVING:
            self._gone_checks = 0
            return
        gone = endpoint_gone(self.health, self._gone_checks, self.port)
        self._gone_checks = 0 if self.health in ("ok", NO_ANSWER) else self._gone_checks + 1
        if gone is None:
            return
        await asyncio.gather(*(self._catch_up(st) for st in self._ranks.values()
                               if st.follower is not None and not st.ended and not st.busy))
        self._learn_stop()
        if self.tracker.failure is None and self.stopping_since is None:
            ev = LogEvent(Kind.ENGINE_DEAD, Severity.FATAL, Phase.FAILED,
                          {"health": self.health}, gone)
            self.tracker.feed_event(0, ev, self.clock.monotonic(), _rfc3339(self.clock.time()))
        self._after_feed()


def health_word(answer: HealthAnswer) -> str:
    """The lane's health column from one ``/health`` answer: ``ok``, the HTTP
    status, ``refused`` (nothing serves the port: refused or dropped) or
    ``no answer`` (it timed out: a hung server or a loaded host)."""
    if answer.status is None:
        return NO_ANSWER if "Timeout" in answer.error else REFUSED
    return "ok" if answer.ok else str(answer.status)


@dataclass(frozen=True)
class _ShellReads:
    """A link's long-lived reader shell as a CommandRunner."""

    read: Callable[[str, float], Awaitable[object]]

    async def run(self, cmd: str, timeout: float) -> object:
        return await self.read(cmd, timeout)


def reader(link: NodeLink) -> CommandRunner:
    """Where a watch's short reads go (the one-shot log reads of the fatal
    decision, the boot's memory and I/O reads): the node's long-lived reader
    shell when the link has one (adapters/ssh.NodeConnection.read: no session
    setup per read, which was most of fatal line -> verdict over a real sshd),
    else a command of its own."""
    read = getattr(link, "read", None)
    return _ShellReads(read) if read is not None else link


def resource_command(memory: bool, pids: Sequence[int], node_io: bool) -> str:
    """One read of a boot's resources on a node, in sections ``@@meminfo``
    (when ``memory``), ``@@engines`` (:func:`io_command` of ``pids``, when
    any) and ``@@io`` (:data:`NODE_IO_READ`, when ``node_io``): one round
    trip each period, and shell builtins only (no fork on a node whose
    memory is filling)."""
    parts = []
    if memory:
        parts.append(f"echo @@meminfo; {MEMORY_READ}")
    if pids:
        parts.append(f"echo @@engines; {io_command(pids)}")
    if node_io:
        parts.append(f"echo @@io; {NODE_IO_READ}")
    return "; ".join(parts)


def resource_parts(text: str) -> dict[str, str]:
    """:func:`resource_command`'s output by section."""
    parts: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        tag = line.rstrip("\n")
        if tag in ("@@meminfo", "@@engines", "@@io"):
            if name is not None:
                parts[name] = "".join(lines)
            name, lines = tag[2:], []
        elif name is not None:
            lines.append(line)
    if name is not None:
        parts[name] = "".join(lines)
    return parts


def io_command(pids: Sequence[int]) -> str:
    """For each rank engine's main process (``@@pid P``) the I/O counters of
    every process of its container (its cgroup v2; the main process alone
    otherwise). Shell builtins only: no fork however many processes. The
    pids are validated integers: nothing else reaches the shell."""
    each_process = builtin_cat_word('"/proc/$q/io"')
    parts = []
    for pid in pids:
        p = int(pid)
        if p <= 0:
            raise ValueError(f"not a process id: {pid!r}")
        parts.append(
            f'echo "@@pid {p}"; {{ cg=""; read -r cg < /proc/{p}/cgroup; case "$cg" in '
            f'0::/) f="";; 0::/*) f="/sys/fs/cgroup${{cg#0::}}/cgroup.procs";; *) f="";; esac; '
            f'if [ -n "$f" ] && [ -r "$f" ]; then while read -r q; do '
            f'{each_process}; done < "$f"; '
            f'else {builtin_cat_word(f"/proc/{p}/io")}; fi; }} 2>/dev/null')
    return "; ".join(parts)


def engine_read_bytes(text: str) -> dict[int, int]:
    """Bytes read so far by each rank's engine (by main pid), from
    :func:`io_command`'s output: per process the larger of ``rchar`` (read
    calls, page-cache hits included) and ``read_bytes`` (from storage, page
    faults of mmapped shards included). Ranks whose processes could not be
    read are absent."""
    out: dict[int, int] = {}
    pid: int | None = None
    rchar = 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "@@pid":
            pid = int(value) if value.strip().isdigit() else None
        elif pid is not None and key in ("rchar:", "read_bytes:") and value.strip().isdigit():
            if key == "rchar:":
                rchar = int(value)
            else:
                out[pid] = out.get(pid, 0) + max(rchar, int(value))
                rchar = 0
    return out


def read_bytes(text: str) -> int | None:
    """Bytes read on a node so far: sectors read of every block device in
    ``/proc/diskstats`` (a partition counts with its disk too: only growth
    matters here) plus the NFS bytes read from the server, page-ins of
    mmapped shards included (``bytes:`` of ``/proc/self/mountstats``). None
    when neither is there."""
    total = 0
    found = False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 14 and parts[0].isdigit() and parts[1].isdigit():
            if parts[2].startswith(("loop", "ram")):
                continue
            with contextlib.suppress(ValueError):
                total += int(parts[5]) * 512
                found = True
        elif parts[:1] == ["bytes:"] and len(parts) >= 7:
            with contextlib.suppress(ValueError):
                total += int(parts[5])
                found = True
    return total if found else None


class LaneWatchers:
    """One watcher per lane for a whole process: the console's service and a
    serve started from it share it. ``on_new`` hears of every watcher made
    here (the service subscribes its feed to it)."""

    def __init__(self, on_new: Callable[[LaneWatcher], None] | None = None) -> None:
        self._watchers: dict[str, LaneWatcher] = {}
        self.on_new = on_new
        self._closed = False

    def get(self, lane: str) -> LaneWatcher | None:
        return self._watchers.get(lane)

    def stopping(self, lane: str) -> None:
        """The lane is being stopped by us: its exits are no failure."""
        if (w := self._watchers.get(lane)) is not None:
            w.stopping()

    def attach(self, lane: str, make: Callable[[], LaneWatcher]) -> LaneWatcher:
        """The lane's watcher, made by ``make`` and started when there is none."""
        w = self._watchers.get(lane)
        return w if w is not None else self._add(lane, make)

    async def replace(self, lane: str, make: Callable[[], LaneWatcher]) -> LaneWatcher:
        """A new boot of the lane: the watcher of the previous one (its verdict
        is about other containers) is stopped and a new one started."""
        # swapped before the first await: a snapshot arriving while the old
        # watch stops must find the new one, not make a third nobody owns
        old = self._watchers.pop(lane, None)
        try:
            return self._add(lane, make)
        finally:
            if old is not None:
                await old.stop()

    def _add(self, lane: str, make: Callable[[], LaneWatcher]) -> LaneWatcher:
        if self._closed:
            # the owner is shutting down: a serve still finishing must not
            # start a watch nobody will stop
            raise asyncio.CancelledError(f"lane watchers closed; {lane} is not watched")
        w = self._watchers[lane] = make()
        w.start()
        if self.on_new is not None:
            self.on_new(w)
        return w

    async def drop(self, lane: str) -> None:
        w = self._watchers.pop(lane, None)
        if w is not None:
            await w.stop()

    async def close(self) -> None:
        self._closed = True
        watchers, self._watchers = list(self._watchers.values()), {}
        await asyncio.gather(*(w.stop() for w in watchers), return_exceptions=True)
