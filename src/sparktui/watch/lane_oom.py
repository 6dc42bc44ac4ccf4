"""The kernel's word on a rank's death (core/oomkill.py has the rule): when a
rank's container exits other than cleanly, or the lane's failure is a generic
"it died" line of a rank, that rank node's kernel journal around the death is
read once, bounded, and an OOM kill of a process of that container becomes
the failure (its time the kill's) or the generic line's cause. Without one an
exit stays what docker says (``container killed (SIGKILL)``).

One read for the console, the sentinel and ``sparktui wait`` alike: the lane
watcher asks the rank's own node (the journal's and docker's stamps are then
on one clock), so a watch with no journal follower (``wait``) hears it too.
They are the watcher's own parts: each takes the watcher and reads and
changes its state as its methods did."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparktui.core.clock import within
from sparktui.core.errors import RemoteError
from sparktui.core.failure import Failure
from sparktui.core.logsig import LogEvent, container_exit, parse_timestamp
from sparktui.core.oomkill import LOOKBACK_S, OomKill, container_kill, oom_exit, parse_oom_kills
from sparktui.watch.lane_model import RankState
from sparktui.watch.lane_reads import reader
from sparktui.watch.readiness import ContainerFacts, inspect_container

if TYPE_CHECKING:
    from sparktui.watch.lane import LaneWatcher

JOURNAL_READ_TIMEOUT_S = 5.0
"""The bound of one read of a rank node's kernel journal (the lane's verdict waits on it)."""
JOURNAL_READ_LINES = 5000
"""At most this many of the last kernel lines since the window's start (a
report's summary and ``Killed process`` lines come last, after its task dump)."""


def kernel_journal_command(since: float) -> str:
    """The node's kernel lines of this boot (``-k`` implies ``-b``) from
    ``since`` (epoch seconds, systemd.time's ``@`` form) on."""
    return (f"journalctl -k -o short-iso-precise --no-pager --since @{int(since)} "
            f"-n {JOURNAL_READ_LINES} 2>/dev/null")


async def kernel_kill(w: LaneWatcher, st: RankState, facts: ContainerFacts, *,
                      ref: float | None, until: float | None) -> OomKill | None:
    """An OOM kill of a process of the rank's container in its node's journal,
    read from LOOKBACK_S before ``ref`` (the exit or the fatal line, on the
    node's clock) or from the container's start when that is later; ``until``
    its FinishedAt (None: it still runs). A journal that cannot be read is
    noted as unread and no kill is claimed."""
    if st.oom_kill is not None:
        return st.oom_kill
    node = st.rc.node
    link = w.links.get(node)
    start = facts.started
    if link is None or (start is None and ref is None):
        return None
    since = max(x for x in (start, None if ref is None else ref - LOOKBACK_S) if x is not None)
    try:
        result = await within(w.clock, JOURNAL_READ_TIMEOUT_S, reader(link).run(
            kernel_journal_command(since), JOURNAL_READ_TIMEOUT_S))
    except (RemoteError, TimeoutError) as exc:
        why = exc.message if isinstance(exc, RemoteError) else \
            f"no answer within {JOURNAL_READ_TIMEOUT_S:g} s"
        w._unread.append(f"rank {st.rc.rank} ({node}): kernel journal: {why}")
        return None
    kills = parse_oom_kills(str(getattr(result, "stdout", "") or "").splitlines())
    st.oom_kill = container_kill(kills, container_id=facts.id,
                                 pids=[p for p in (st.pid, facts.pid) if p is not None],
                                 started=start, until=until)
    return st.oom_kill


async def exit_event(w: LaneWatcher, st: RankState,
                     facts: ContainerFacts | None) -> tuple[LogEvent, str | None]:
    """A rank's exit as the lane's watch takes it, and when it happened: the
    kernel's OOM kill of a process of its container when its node's journal
    shows one (stamped by the kill), else docker's exit (by FinishedAt)."""
    async with st.exit_read:
        if st.exit is not None:
            return st.exit
        code = facts.exit_code if facts is not None and facts.exit_code is not None else -1
        finished = facts.finished if facts is not None else None
        end = parse_timestamp(finished)
        kill = None
        if facts is not None and code != 0:
            kill = await kernel_kill(w, st, facts, ref=end, until=end)
        if kill is None:
            st.exit = container_exit(code, facts.oom_killed if facts else False), finished
        else:
            first = kill.at is not None and (end is None or kill.at < end)
            st.exit = oom_exit(kill, st.rc.node, code), kill.stamp if first else finished
        return st.exit


async def explain(w: LaneWatcher, failure: Failure) -> None:
    """A generic fatal line (that the engine died, not why) without a specific
    cause: the failing rank's kernel journal is read for an OOM kill of its
    container, which becomes the line's cause (its container may still run:
    vLLM's API server logs its engine core's death before it exits)."""
    st = w._ranks.get(failure.rank)
    if st is None or st.exit is not None:
        return
    facts = await inspect_container(w.links[st.rc.node], st.rc.container) \
        if st.rc.node in w.links else None
    if facts is None:
        return
    end = parse_timestamp(facts.finished)
    kill = await kernel_kill(w, st, facts, ref=parse_timestamp(failure.timestamp) or end,
                             until=end)
    if kill is not None:
        w.tracker.feed_event(failure.rank, oom_exit(kill, st.rc.node,
                                                    None if facts.running else facts.exit_code),
                             w.clock.monotonic(), kill.stamp)
