"""The sentinel's socket without a cluster: what an attaching console gets
first (the night so far), the live stream to two consoles at once, the 0600
socket, a slow console resynced instead of stalling the sentinel, and the
end of the stream said as it happened (a goodbye, or a socket that closed)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from sparktui.core.clock import SystemClock
from sparktui.core.state import HistoryPoint, NodeSnapshot, NodeState
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.service.attach import (
    SentinelFeed,
    SentinelHub,
    socket_path,
)
from sparktui.service.events import (
    Alert,
    AlertRaised,
    LaneChanged,
    LaneGone,
    LogLinesArrived,
    NodeSampled,
    ServiceEvent,
    WorkflowProgressed,
)
from sparktui.service.lanes import LaneView
from sparktui.watch.follower import LogLine

LANE = "glm53-flash-eugr-2x"
THRASH = Alert("thrash:dgx6", "thrash", "dgx6", ("PSI full avg10 41.2 %",),
               "recover dgx6", notified=True)


def sample(node: str, t: float, avail_kib: int) -> NodeSampled:
    snap = NodeSnapshot(node, NodeState.ONLINE, t, last_ok_at=t)
    return NodeSampled(snap, ThrashVerdict(node, ThrashLevel.OK, (), "", 0),
                       HistoryPoint(t, avail_kib, 127_600_748, 0.0, 0.0))


def lane(phase: str) -> LaneView:
    return LaneView(LANE, "2nodes-dac", "vllm", 8000, (), phase=phase)


class Console:
    """One attached console: what it heard, in order."""

    def __init__(self, feed: SentinelFeed) -> None:
        self.feed = feed
        self.events: list[ServiceEvent] = []
        self.task = asyncio.create_task(feed.follow(self.events.append))

    async def until(self, pred, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
        async with asyncio.timeout(timeout):
            while not pred():
                await asyncio.sleep(0.01)

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.feed.close()


async def attach(path: Path) -> Console:
    feed = await SentinelFeed.attach(path, SystemClock())
    assert feed is not None
    return Console(feed)


async def test_a_console_gets_the_night_so_far_then_the_live_stream(tmp_path: Path) -> None:
    path = socket_path(tmp_path)
    hub = SentinelHub(path, clock=SystemClock(), pid=4242)
    for i in range(3):
        hub.publish(sample("dgx6", 100.0 + i, 90_000_000 - i))
    hub.publish(LaneChanged(lane("loading")))
    hub.publish(LaneChanged(lane("serving")))
    hub.publish(LogLinesArrived(LANE, 0, (LogLine(0, None, "Application startup complete."),), 7))
    hub.publish(AlertRaised(THRASH))
    await hub.start()
    try:
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        first, second = await attach(path), await attach(path)
        assert first.feed.pid == 4242
        await first.until(lambda: any(isinstance(e, LogLinesArrived) for e in first.events))
        state = first.feed.state
        assert [p.mem_available_kib for p in state.history("dgx6")] == [
            90_000_000, 89_999_999, 89_999_998]
        assert state.lanes[LANE].phase == "serving"
        assert state.log_tail(LANE, 0)[1] == 7
        assert state.alerts == {"thrash:dgx6": THRASH}  # notified, as the sentinel sent it
        assert state.verdict("dgx6").level is ThrashLevel.OK
        assert state.verdict("dgx1").node == "dgx1"  # never sampled: ok, not a KeyError
        assert AlertRaised(THRASH) in first.events

        cleared = Alert("fatal:x", "fatal", "x", ("rank 0: EngineDead",), "stop x")
        hub.publish(AlertRaised(cleared))
        for c in (first, second):
            await c.until(lambda c=c: AlertRaised(cleared) in c.events)  # type: ignore[misc]
        assert first.events[-1] == second.events[-1] == AlertRaised(cleared)
        assert hub.clients == 2
    finally:
        await hub.close()
    for c in (first, second):
        assert await asyncio.wait_for(c.task, 5) == "stopped (the sentinel stops)"
        await c.close()
    assert not path.exists()


async def test_a_slow_console_is_resynced_and_never_stalls_the_sentinel(tmp_path: Path) -> None:
    path = socket_path(tmp_path)
    hub = SentinelHub(path, clock=SystemClock(), pid=1, queue_lines=5)
    await hub.start()
    try:
        c = await attach(path)
        hub.publish(LaneChanged(lane("serving")))
        await c.until(lambda: LANE in c.feed.state.lanes)
        # the console's reader does not run while these are published: its queue overflows
        hub.publish(LaneGone(LANE))
        for i in range(20):
            hub.publish(sample("dgx5", 200.0 + i, 80_000_000))
        assert hub.resyncs >= 1
        await c.until(lambda: LaneGone(LANE) in c.events
                      and len(c.feed.state.history("dgx5")) == 20)
        assert LANE not in c.feed.state.lanes  # the gone lane was said gone after the replay
        await c.close()
    finally:
        await hub.close()


async def test_a_sentinel_that_dies_says_nothing_and_the_console_knows(tmp_path: Path) -> None:
    path = socket_path(tmp_path)
    hub = SentinelHub(path, clock=SystemClock(), pid=7)
    await hub.start()
    c = await attach(path)
    await asyncio.sleep(0.05)
    for client in list(hub._clients.values()):  # killed: no goodbye, the socket just closes
        client.writer.transport.abort()
    assert "closed its socket" in await asyncio.wait_for(c.task, 5)
    await c.close()
    await hub.close()


async def test_no_sentinel_means_no_feed(tmp_path: Path) -> None:
    path = socket_path(tmp_path)
    assert await SentinelFeed.attach(path, SystemClock()) is None
    path.write_text("")  # a file where the socket was: nobody listens
    assert await SentinelFeed.attach(path, SystemClock()) is None
    os.unlink(path)


HOSTILE = [
    b'{"k": "stopping", "lane": "glm53-flash-eugr-2x"}\n',
    b'{"k": "workflow", "e": {"type": "WorkflowProgressed"}}\n',
    b"\x00\xff not json at all\n",
    b"[" * 200_000 + b"\n",  # deeper than any parser's recursion
    b"{" * 100_000,  # and a line that never ends
]


async def test_what_a_client_sends_is_dropped_and_its_subscription_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 27: the socket is a subscription. Whatever a same-user client
    writes (a stop mark, a forged workflow step, garbage, a deeply nested or
    endless line) is read and dropped unparsed, said once in the log, and the
    client keeps receiving the stream."""
    path = socket_path(tmp_path)
    hub = SentinelHub(path, clock=SystemClock(), pid=1)
    await hub.start()
    try:
        c, other = await attach(path), await attach(path)
        caplog.set_level(logging.WARNING, logger="sparktui.service.attach")
        for line in HOSTILE:
            c.feed._writer.write(line)
            await c.feed._writer.drain()
        hub.publish(LaneChanged(lane("serving")))
        for who in (c, other):
            await who.until(lambda who=who: LaneChanged(lane("serving")) in who.events)  # type: ignore[misc]
        await asyncio.sleep(0.1)  # the rest of what it wrote, drained
        hub.publish(LaneGone(LANE))
        await c.until(lambda: LaneGone(LANE) in c.events)
        assert not c.task.done() and hub.clients == 2
        said = [r for r in caplog.records if "ignored" in r.getMessage()]
        assert len(said) == 1, [r.getMessage() for r in said]
        assert "stopping" in said[0].getMessage()
        assert not any(isinstance(e, WorkflowProgressed) for e in c.events + other.events)
        await c.close()
        await other.close()
    finally:
        await hub.close()
