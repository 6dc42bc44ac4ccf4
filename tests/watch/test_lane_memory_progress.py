"""A healthy load that prints nothing (InstantTensor, worker ranks) must never be
declared stalled while memory keeps filling on the lane's nodes: the console's
lane watcher takes that progress from the poller's snapshots."""

from __future__ import annotations

from sparktui.core.memload import MemoryLoad
from sparktui.core.state import MemInfo, NodeSnapshot, NodeState, ProbeResult
from sparktui.watch.lane import LaneWatcher
from sparktui.watch.readiness import RankContainer

GIB_KIB = 1024 * 1024
TOTAL_KIB = 127_600_748


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:  # never awaited here
        raise AssertionError("not used")


def snap(node: str, available_gib: float, t: float) -> NodeSnapshot:
    mem = MemInfo(total_kib=TOTAL_KIB, available_kib=int(available_gib * GIB_KIB))
    return NodeSnapshot(node, NodeState.ONLINE, t, probe=ProbeResult(meminfo=mem))


def watch(clock: Clock) -> LaneWatcher:
    ranks = tuple(RankContainer(r, f"dgx{5 + r}", f"sparktui-x-r{r}", 4, 8000, "vllm", True)
                  for r in range(4))
    w = LaneWatcher("x", ranks, {}, "127.0.0.1", clock=clock, stall_after_s=900.0,
                    resource_poll_s=None)
    w.tracker.feed(0, "2026-11-30T01:00:00.000000000Z (EngineCore_DP0 pid=312) INFO 11-30 "
                      "01:00:00 [gpu_model_runner.py:2000] Starting to load model x...", clock.t)
    return w


def test_memory_filling_keeps_a_silent_load_alive() -> None:
    clock = Clock()
    w = watch(clock)
    available = 118.8
    for _ in range(48):               # 48 minutes of a 376 GB InstantTensor load
        clock.t += 60
        available -= 1.8
        w.on_snapshot(snap("dgx6", available, clock.t))
        assert not w.tracker.check_stall(clock.t)
    assert w.tracker.phase.value != "stalled"


def test_without_memory_growth_the_stall_window_still_applies() -> None:
    clock = Clock()
    w = watch(clock)
    for _ in range(16):
        clock.t += 60
        w.on_snapshot(snap("dgx6", 100.0, clock.t))      # flat: no progress
        w.on_snapshot(snap("dgx1", 50.0 - _, clock.t))   # not a node of this lane
    assert w.tracker.check_stall(clock.t)


def test_memory_progress_rule() -> None:
    m = MemoryLoad(step_kib=GIB_KIB)
    assert m.observe("a", 100 * GIB_KIB, 60.0) is None        # first reading: the mark
    assert m.observe("a", int(99.5 * GIB_KIB), 120.0) is None  # less than a step
    note = m.observe("a", 99 * GIB_KIB, 180.0)
    assert note is not None and "1.0 GiB more resident" in note
    assert m.observe("a", 110 * GIB_KIB, 240.0) is None       # memory freed resets the mark
    assert m.observe("a", 109 * GIB_KIB, 300.0) is not None
