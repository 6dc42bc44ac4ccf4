"""What a lane's feed reports of its watcher: every boot phase the lane
passes, in order, however the watcher's events fall (pure: no task, no
network; the tracker is fed by hand)."""

from __future__ import annotations

from sparktui.core.failure import Failure
from sparktui.core.logsig import Kind, Phase
from sparktui.service.events import LaneChanged, ServiceEvent
from sparktui.service.lane_feed import LaneFeed, fatal_alert
from sparktui.watch.lane import LaneWatcher, PhaseChanged
from sparktui.watch.readiness import RankContainer

from ..tui.fakecluster import vllm_boot_lines
from ..tui.harness import ScaledClock

LANE = "glm53-flash-eugr-2x"


def feed_of(events: list[ServiceEvent]) -> LaneFeed:
    rank0 = RankContainer(0, "dgx5", f"sparktui-{LANE}-r0", 1, 8000, "vllm", True)
    watcher = LaneWatcher(LANE, (rank0,), {}, "127.0.0.1", stall_after_s=900.0,
                          clock=ScaledClock())
    feed = LaneFeed(watcher, lambda: "4nodes-switch-b", events.append)
    feed.publish()
    return feed


def phases(events: list[ServiceEvent]) -> list[str]:
    """Each phase reported, as a reader of the lane's row sees them come."""
    out: list[str] = []
    for e in events:
        if isinstance(e, LaneChanged) and (not out or out[-1] != e.lane.phase):
            out.append(e.lane.phase)
    return out


async def test_one_log_batch_carrying_two_phase_changes_reports_both() -> None:
    """The story at 60x once went `KV allocation` -> `serving`: one batch of
    rank 0's lines held the API line and "Application startup complete.", and
    the feed reported the lane once per watcher event, as it was by then."""
    events: list[ServiceEvent] = []
    feed = feed_of(events)
    tracker = feed.watcher.tracker
    lines = vllm_boot_lines(shards=2)
    api = next(i for i, ln in enumerate(lines) if "init engine" in ln)
    for line in lines[:api]:
        tracker.feed(0, line, 1.0)
        feed.publish()  # a batch per line: each phase reported as it comes
    assert phases(events) == ["starting", "loading weights", "KV allocation"]
    for line in lines[api:]:  # one batch: init engine, the API line, startup complete
        tracker.feed(0, line, 2.0)
    feed.publish()  # its LinesArrived
    assert phases(events) == ["starting", "loading weights", "KV allocation", "API starting",
                              "serving"]
    told = len(events)
    feed.publish()
    assert len(events) == told  # nothing new: nothing reported again


async def test_the_endpoint_check_beside_a_batch_does_not_fold_its_phase() -> None:
    """A batch being fed (it yields every 64 lines) reached API starting when
    the endpoint check beside it made the lane serving: the PhaseChanged of
    the check is the first event after both."""
    events: list[ServiceEvent] = []
    feed = feed_of(events)
    tracker = feed.watcher.tracker
    lines = vllm_boot_lines(shards=2)
    api = next(i for i, ln in enumerate(lines) if "Starting vLLM server" in ln)
    for line in lines[:api + 1]:  # the lines of the batch fed so far
        tracker.feed(0, line, 1.0)
    tracker.mark_serving(2.5)
    feed.on_event(PhaseChanged(LANE, Phase.SERVING, tracker.summary()))
    assert phases(events) == ["starting", "loading weights", "KV allocation", "API starting",
                              "serving"]


async def test_a_whole_boot_read_in_one_batch_reports_every_phase_it_passed() -> None:
    """A lane found late (a serve from another process, first polled near its
    end) has its log read from the start in one batch: each phase still comes,
    in order, the lane's last one last, and the lane's progress is not claimed
    for a phase it has left."""
    events: list[ServiceEvent] = []
    feed = feed_of(events)
    for line in vllm_boot_lines(shards=2):
        feed.watcher.tracker.feed(0, line, 1.0)
    feed.publish()
    assert phases(events) == ["starting", "loading weights", "KV allocation", "API starting",
                              "serving"]
    views = [e.lane for e in events if isinstance(e, LaneChanged)]
    assert views[1].progress is None and not views[1].progress_text


def test_a_fatal_alerts_next_step_is_its_causes() -> None:
    """``WorkerProc failed to start.`` (vllm 0.33 multiproc_executor.py:1057) says
    that a worker died; the CUDA OOM after it says why: the alert advises the
    OOM's next step, not "read the boot log"."""
    f = Failure(0, Kind.ENGINE_FAILED, "WorkerProc failed to start.", None, (),
                cause="torch.AcceleratorError: CUDA error: out of memory", cause_rank=3,
                cause_kind=Kind.CUDA_OOM)
    assert "gpu_memory_utilization" in fatal_alert("l", Phase.LOADING, f).next_step
    bare = Failure(0, Kind.ENGINE_FAILED, "WorkerProc failed to start.", None, ())
    assert "read the boot log (rank 0)" in fatal_alert("l", Phase.LOADING, bare).next_step
