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

Its parts, by what they hold: ``lane_model.py`` (the events, verdicts and
per-rank state), ``lane_fatal.py`` (the fatal decision), ``lane_endpoint.py``
(the readiness stages and the serving endpoint's checks), ``lane_reads.py``
(the nodes' memory and I/O reads while the lane boots).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from sparktui.core.clock import Clock
from sparktui.core.errors import RemoteError
from sparktui.core.failure import Failure
from sparktui.core.logsig import (
    LogEvent,
    Phase,
    classify,
    parse_timestamp,
)
from sparktui.core.memload import MemoryLoad
from sparktui.core.phases import PhaseTracker
from sparktui.core.state import NodeSnapshot
from sparktui.watch import lane_endpoint, lane_fatal, lane_oom, lane_reads
from sparktui.watch.follower import (
    LogFollower,
    LogLine,
    OpenLine,
    running_check,
)
from sparktui.watch.lane_model import (
    BarRedrawn as BarRedrawn,
)
from sparktui.watch.lane_model import (
    EndpointChecked as EndpointChecked,
)
from sparktui.watch.lane_model import (
    FatalDecided as FatalDecided,
)
from sparktui.watch.lane_model import (
    LaneEvent,
    LinesArrived,
    PhaseChanged,
    RankExited,
    RankState,
    StopIntent,
    Stopping,
    Subscriber,
    Verdict,
    WatchEnded,
)
from sparktui.watch.lane_model import (
    MemoryRead as MemoryRead,
)
from sparktui.watch.lane_reads import IO_POLL_S
from sparktui.watch.readiness import (
    NodeLink,
    Outcome,
    RankContainer,
    WaitResult,
    inspect_container,
)

log = logging.getLogger(__name__)

LOG_BUFFER_LINES = 5000
"""Lines kept per rank for the console; older ones are dropped."""
FEED_SLICE = 64
"""Lines classified between two yields to the event loop during a burst."""

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
        self._ranks: dict[int, RankState] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopped = False
        self._result: WaitResult | None = None
        self._verdict = asyncio.Event()
        self._decided: Failure | None = None
        self._phase: Phase | None = None
        self.memory = MemoryLoad()
        """MemAvailable on the ranks' nodes: load progress against a stall, and
        the weights resident (the console's Progress cell, lane_feed.py)."""
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
            self._spawn("resources", lambda: lane_reads.resources(self))
        if self.probe_endpoint and (port := self.port) is not None:
            self._spawn("endpoint", lambda: lane_endpoint.endpoint(self, port))

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
        self._ranks[rc.rank] = RankState(rc)
        st = self._ranks[rc.rank]
        self._spawn(key, lambda: self._follow_rank(st))
        if self.follow:
            self._spawn(f"reader:{rc.node}", lambda: self._open_reader(rc.node))

    async def _open_reader(self, node: str) -> None:
        """The node's reader shell (lane_reads.reader) opened as the watch
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

    async def _follow_rank(self, st: RankState) -> None:
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
        finished = facts.finished if facts else None
        self._learn_stop(facts.started if facts else None)
        # read (the kernel's word with it) before the rank counts as ended: the
        # fatal decision waits for a pending exit, not for what follows it
        exited = None if self._exit_ours(finished) else await lane_oom.exit_event(
            self, st, facts)
        st.ended = True
        self.ended_at = self.clock.time()
        self._emit(RankExited(self.lane, rc.rank, rc.node, code, oom))
        if exited is None or self._exit_ours(finished):
            self._stop_seen()
            return
        self.tracker.feed_event(rc.rank, exited[0], self.clock.monotonic(), exited[1])
        self._after_feed()

    async def _ingest(self, st: RankState, batch: Sequence[LogLine]) -> None:
        """A batch's lines; a held line's redraw ending it (an OpenLine) is
        load progress only: no line of the log, nor of its buffer."""
        if batch and isinstance(batch[-1], OpenLine):
            if len(batch) > 1:
                await self._ingest_lines(st, batch[:-1])
            self._redrawn(st, batch[-1])
        else:
            await self._ingest_lines(st, batch)

    def _redrawn(self, st: RankState, line: OpenLine) -> None:
        if self.stopping_since is not None:
            return  # a lane going down loads nothing
        if self.tracker.feed_redraw(st.rc.rank, line.text, self.clock.monotonic(), line.ts):
            self._emit(BarRedrawn(self.lane, st.rc.rank, st.rc.node))
            self._after_feed()

    async def _ingest_lines(self, st: RankState, batch: Sequence[LogLine]) -> None:
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
            self._spawn("decide", lambda: lane_fatal.decide(self))
    # -- stall and memory ----------------------------------------------------

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
        rank's node is load progress (watch/lane_reads.py)."""
        lane_reads.on_snapshot(self, snap)


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
