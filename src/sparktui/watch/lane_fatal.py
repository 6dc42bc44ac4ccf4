"""The fatal decision of a lane's watch (watch/lane.py, "Fatal, decided
right"): the first fatal line seen is a candidate; the lane's failure is
decided once every rank's log has been read past its time, an earlier fatal
line of another rank found meanwhile replacing it; the failing rank is read
to its end for its root cause, and a rank whose log ended is read for its
exit. They are the watcher's own parts: each takes the watcher and reads and
changes its state as its methods did."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from sparktui.core.clock import within
from sparktui.core.errors import RemoteError
from sparktui.core.failure import GENERIC_FATAL
from sparktui.watch import lane_oom
from sparktui.watch.follower import (
    CATCH_UP_TIMEOUT_S,
    LogFollower,
    LogLine,
)
from sparktui.watch.lane_model import FatalDecided, RankState, Verdict
from sparktui.watch.lane_reads import reader
from sparktui.watch.readiness import (
    inspect_container,
    port_holders,
)

if TYPE_CHECKING:
    from sparktui.watch.lane import LaneWatcher

EXIT_POLL_S = 0.005
"""How often the fatal decision looks whether a rank's pending exit is known."""


def exit_pending(w: LaneWatcher, st: RankState) -> bool:
    """A followed rank's log ended and its exit is being read (the bounded
    inspect after the stream): a remote rank SIGKILLed before the head's
    NCCL error died first, and only its exit says so."""
    return w.follow and st.follower is not None and st.follower.ended and not st.ended


def caught_up(w: LaneWatcher, st: RankState, at: float | None) -> bool:
    if st.busy or exit_pending(w, st):
        return False
    if st.ended or st.unreadable or (st.follower is not None and st.follower.ended):
        return True
    return at is not None and st.fed_time is not None and st.fed_time >= at


async def decide(w: LaneWatcher) -> None:
    """Decide the lane's failure once every rank's log is read past the
    candidate's time; an earlier fatal line found meanwhile replaces it.
    Beside it, the head node is asked whether another lane holds the port."""
    holders = asyncio.create_task(port_taken(w))
    try:
        await read_past_failure(w)
        failure = w.tracker.failure
        assert failure is not None
        if failure.why in GENERIC_FATAL:  # that it died, not why: the kernel may know
            await lane_oom.explain(w, failure)
            failure = w.tracker.failure
            assert failure is not None
        w._decided = failure
        w._emit(FatalDecided(w.lane, failure))
        w._port_taken = await holders
    finally:
        holders.cancel()
    w._finish(Verdict.FAILED, {st.rc.rank: "exited" for st in w._ranks.values()
                               if st.ended})


async def read_past_failure(w: LaneWatcher) -> None:
    read_once: set[int] = set()
    while True:
        f = w.tracker.failure
        assert f is not None
        at = f.read_past()
        behind = [st for st in w._ranks.values() if not caught_up(w, st, at)]
        # a generic fatal line (EngineDead, a worker died) says that, not why: the
        # failing rank is read to its end too, its root cause follows the line
        if f.cause is None and f.kind in GENERIC_FATAL and f.rank not in read_once:
            rank_st = w._ranks.get(f.rank)
            if rank_st is not None and rank_st not in behind and not rank_st.ended:
                behind.append(rank_st)
        behind = [st for st in behind
                  if st.rc.rank not in read_once or st.busy or exit_pending(w, st)]
        if not behind:
            if w.tracker.failure is f:
                return
            continue
        if any(exit_pending(w, st) for st in behind):
            await asyncio.sleep(EXIT_POLL_S)  # the inspect is bounded (INSPECT_TIMEOUT_S)
            continue
        if any(st.busy for st in behind):
            await asyncio.sleep(0)
            continue
        read_once.update(st.rc.rank for st in behind)
        await asyncio.gather(*(catch_up(w, st) for st in behind))


async def port_taken(w: LaneWatcher) -> str:
    rank0 = next((r for r in w.ranks if r.rank == 0), None)
    if rank0 is None or rank0.port is None or rank0.node not in w.links:
        return ""
    holders = await port_holders(w.links[rank0.node], rank0.port, w.lane)
    return (f"port {rank0.port} on {rank0.node} answered by lane {', '.join(holders)}"
            if holders else "")


async def catch_up(w: LaneWatcher, st: RankState) -> None:
    if st.follower is None:
        st.unreadable = "not followed yet"
        w._unread.append(f"rank {st.rc.rank}: its log was not followed yet")
        return
    try:
        lines = await bounded_catch_up(w, st.follower, st.rc.node)
    except RemoteError as exc:
        st.unreadable = exc.message
        w._unread.append(f"rank {st.rc.rank} ({st.rc.node}): {exc.message}")
        return
    if lines:
        await w._ingest(st, lines)
    st.fed_time = max(st.fed_time or 0.0, w.clock.time())
    if w.follow and not st.ended:
        # a rank read to its end may be one that died before the candidate (a
        # remote rank SIGKILLed, the head's NCCL error after): its exit says so
        # before its follower has noticed the end of its stream
        facts = await inspect_container(w.links[st.rc.node], st.rc.container)
        if facts is not None and not facts.running:
            w._learn_stop(facts.started)  # a stop's exit is the stop's, not a death
        if facts is not None and not facts.running and not w._exit_ours(facts.finished):
            event, at = await lane_oom.exit_event(w, st, facts)
            w.tracker.feed_event(st.rc.rank, event, w.clock.monotonic(), at)


async def bounded_catch_up(w: LaneWatcher, follower: LogFollower, node: str) -> list[LogLine]:
    """A catch-up read bounded on the watcher's own clock: a starved node
    must not hold the lane's verdict (its rank counts as unreadable), and
    under the simulator's clock the bound is simulated time, as the rest
    of the watch is."""
    try:
        return await within(w.clock, CATCH_UP_TIMEOUT_S,
                            follower.catch_up(reader(w.links[node])))
    except TimeoutError:
        raise RemoteError(node, "docker logs --since (catch-up)",
                          f"no answer within {CATCH_UP_TIMEOUT_S:g} s") from None

