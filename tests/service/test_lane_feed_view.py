"""What the console's Lanes row learns of one lane from its watcher
(service/lane_feed.LaneFeed.view): a failed lane's failure in brief."""

from __future__ import annotations

from sparktui.service.events import ServiceEvent
from sparktui.service.lane_feed import LaneFeed
from sparktui.watch.lane import LaneWatcher
from sparktui.watch.readiness import RankContainer

P = "2026-11-30T01:00:00.000000000Z (EngineCore_DP0 pid=312) "


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:  # never awaited here
        raise AssertionError("not used")


def feed(clock: Clock, nranks: int = 4) -> tuple[LaneWatcher, LaneFeed, list[ServiceEvent]]:
    ranks = tuple(RankContainer(r, f"dgx{5 + r}", f"sparktui-x-r{r}", nranks, 8000, "vllm",
                                True) for r in range(nranks))
    w = LaneWatcher("x", ranks, {}, "127.0.0.1", clock=clock, stall_after_s=900.0,
                    resource_poll_s=None)
    events: list[ServiceEvent] = []
    return w, LaneFeed(w, lambda: "4nodes-switch", events.append), events


def test_a_failed_lanes_view_says_why_in_brief() -> None:
    clock = Clock()
    w, f, _ = feed(clock)
    w.tracker.feed(0, P + "ERROR 11-30 01:00:00 [core.py:1] EngineCore encountered a fatal "
                          "error.", clock.t)
    w.tracker.feed(0, "TimeoutError: RPC call to sample_tokens timed out.", clock.t)
    view = f.view()
    assert view.phase == "failed"
    assert view.failure_brief == "rank 0: RPC call to sample_tokens timed out."
