"""What the console's Lanes row learns of one lane from its watcher
(service/lane_feed.LaneFeed.view): a failed lane's failure in brief; a
load's progress where the log prints none."""

from __future__ import annotations

from sparktui.core.loadprogress import READ, RESIDENT
from sparktui.core.state import MemInfo, NodeSnapshot, NodeState, ProbeResult
from sparktui.service.events import LaneChanged, ServiceEvent
from sparktui.service.lane_feed import LaneFeed
from sparktui.watch.lane import LaneWatcher
from sparktui.watch.readiness import RankContainer

from ..fixtures.clocks import SimAt

P = "2026-11-30T01:00:00.000000000Z (EngineCore_DP0 pid=312) "


def feed(clock: SimAt, nranks: int = 4) -> tuple[LaneWatcher, LaneFeed, list[ServiceEvent]]:
    ranks = tuple(RankContainer(r, f"dgx{5 + r}", f"sparktui-x-r{r}", nranks, 8000, "vllm",
                                True) for r in range(nranks))
    w = LaneWatcher("x", ranks, {}, "127.0.0.1", clock=clock, stall_after_s=900.0,
                    resource_poll_s=None)
    events: list[ServiceEvent] = []
    return w, LaneFeed(w, lambda: "4nodes-switch", events.append), events


def test_a_failed_lanes_view_says_why_in_brief() -> None:
    clock = SimAt(1000.0)
    w, f, _ = feed(clock)
    w.tracker.feed(0, P + "ERROR 11-30 01:00:00 [core.py:1] EngineCore encountered a fatal "
                          "error.", clock.t)
    w.tracker.feed(0, "TimeoutError: RPC call to sample_tokens timed out.", clock.t)
    view = f.view()
    assert view.phase == "failed"
    assert view.failure_brief == "rank 0: RPC call to sample_tokens timed out."


GIB_KIB = 1024 * 1024
TOTAL_KIB = 127_600_748
LOADING = P + "INFO 11-30 01:00:00 [model_runner.py:399] Loading model from scratch..."


def snap(node: str, available_gib: float, t: float) -> NodeSnapshot:
    mem = MemInfo(total_kib=TOTAL_KIB, available_kib=int(available_gib * GIB_KIB))
    return NodeSnapshot(node, NodeState.ONLINE, t, probe=ProbeResult(meminfo=mem))


def test_a_load_that_prints_nothing_shows_the_weights_resident_with_an_eta() -> None:
    """An InstantTensor load's worker ranks (and rank 0 without its bar) print
    nothing while loading: the row read `serve: readiness` for 40 minutes.
    The poller's MemAvailable on each rank's node, against the recipe's
    weights per rank (the service sets ``weights_gib``), is its progress."""
    clock = SimAt(1000.0)
    w, f, events = feed(clock)
    f.weights_gib = 94.0
    w.tracker.feed(0, LOADING, clock.t)
    for minute in range(21):
        for r in w.ranks:
            w.on_snapshot(snap(r.node, 118.8 - 2.0 * minute, clock.t))
        clock.t += 60
    view = f.view()
    assert view.phase == "loading weights" and view.load is not None
    assert (view.load.measure, view.load.amount()) == (RESIDENT, "40/94G")
    assert view.progress is not None and round(view.progress, 2) == 0.43
    assert view.load.eta_s is not None and abs(view.load.eta_s - 27 * 60) < 60
    assert view.progress_text.startswith("40/94 GiB resident (rank 0), 2.0 GiB/min, ETA 2")
    changed = [e.lane for e in events if isinstance(e, LaneChanged)]
    assert changed and changed[-1] == view       # published as it moved


def test_rank_0s_byte_bar_comes_before_the_memory() -> None:
    clock = SimAt(1000.0)
    w, f, _ = feed(clock)
    f.weights_gib = 94.0
    w.tracker.feed(0, LOADING, clock.t)
    for minute in range(3):
        for r in w.ranks:
            w.on_snapshot(snap(r.node, 118.8 - 2.0 * minute, clock.t))
        clock.t += 60
    w.tracker.feed(0, "2026-11-30T01:00:00.000000000Z \rLoading safetensors using "
                      "InstantTensor loader:  50% Completed | 188G/376G [24:00<24:00, "
                      "140MB/s]\n", clock.t)
    view = f.view()
    assert view.load is not None and (view.load.measure, view.load.amount()) == (READ,
                                                                                 "188/376G")


def test_without_the_recipes_weights_there_is_no_memory_progress() -> None:
    clock = SimAt(1000.0)
    w, f, _ = feed(clock)
    w.tracker.feed(0, LOADING, clock.t)
    for minute in range(3):
        w.on_snapshot(snap("dgx5", 118.8 - 2.0 * minute, clock.t))
        clock.t += 60
    assert f.view().load is None
