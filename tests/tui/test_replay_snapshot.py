"""Snapshot of `sparktui replay`: a fixed recorded night (eight nodes, a lane
loading on dgx5-8, dgx6 thrashing, its alert sent to the phone), paused at
the alert, through the recording file and back. Review the diff report
before `--snapshot-update`."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import MappingProxyType

from sparktui.core.config_load import load_config
from sparktui.core.state import (
    ContainerInfo,
    HistoryPoint,
    LoadAvg,
    MemInfo,
    NodeSnapshot,
    NodeState,
    ProbeResult,
    Psi,
    PsiLine,
)
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.service.events import (
    Alert,
    AlertRaised,
    LaneChanged,
    LogLinesArrived,
    NodeSampled,
    ServiceEvent,
)
from sparktui.service.lanes import LaneView
from sparktui.service.recorded import read_recording
from sparktui.service.recording import Recorder
from sparktui.service.replay import ReplaySource
from sparktui.tui.replay import ReplayApp
from sparktui.watch.follower import LogLine
from sparktui.watch.readiness import RankContainer

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_764_455_700.0  # 2025-11-29 22:35 UTC
LANE = "glm53-mxfp4-fp8-4x-r39-196k"
GIB = 1024 * 1024


class FixedClock:
    def __init__(self) -> None:
        self.t = T0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


def node_sample(node: str, t: float, avail_gib: float, psi_full: float,
                state: NodeState = NodeState.ONLINE,
                level: ThrashLevel = ThrashLevel.OK) -> NodeSampled:
    rank = {"dgx5": 0, "dgx6": 1, "dgx7": 2, "dgx8": 3}.get(node)
    containers = () if rank is None else (ContainerInfo(
        f"sparktui-{LANE}-r{rank}", "vllm-node:latest", "running", "Up 10 minutes",
        MappingProxyType({"sparktui.lane": LANE, "sparktui.rank": str(rank),
                          "sparktui.nranks": "4", "sparktui.port": "8000",
                          "sparktui.engine": "vllm", "sparktui.cluster": "4nodes-switch-b"}),
        up_for_s=600.0),)
    probe = None if state is not NodeState.ONLINE else ProbeResult(
        meminfo=MemInfo(int(121.6 * GIB), int(avail_gib * GIB)),
        psi=Psi(PsiLine(psi_full * 1.5, psi_full, psi_full / 2, 1000),
                PsiLine(psi_full, psi_full, psi_full / 2, 1000)),
        loadavg=LoadAvg(2.0, 1.5, 1.0), uptime_s=3600.0, kernel="6.17.0-1031-nvidia",
        containers=containers, docker_ok=True)
    verdict = ThrashVerdict(node, level, ("ping answers, SSH probe failed 3x",)
                            if level else (), "plug-cycle" if level else "", 0)
    return NodeSampled(NodeSnapshot(node, state, t, probe, liveness=True),
                       verdict, HistoryPoint(t, int(avail_gib * GIB), int(121.6 * GIB),
                                             psi_full * 1.5, psi_full) if probe else None)


def night() -> list[ServiceEvent]:
    nodes = [f"dgx{i}" for i in range(1, 9)]
    ranks = tuple(RankContainer(r, n, f"sparktui-{LANE}-r{r}", 4, 8000, "vllm", True)
                  for r, n in enumerate(["dgx5", "dgx6", "dgx7", "dgx8"]))
    out: list[ServiceEvent] = []
    for step in range(20):
        t = T0 + 30 * step
        for node in nodes:
            busy = node in ("dgx5", "dgx6", "dgx7", "dgx8")
            avail = 118.0 - (5.0 * step if busy else 0.0)
            if node == "dgx6" and step >= 18:
                out.append(node_sample(node, t, 0, 0, NodeState.STARVED, ThrashLevel.THRASH))
            else:
                out.append(node_sample(node, t, max(avail, 4.0), 2.0 * step if busy else 0.0))
        if step == 0:
            out.append(LaneChanged(LaneView(LANE, "4nodes-switch-b", "vllm", 8000, ranks,
                                            phase="loading weights", progress=0.1)))
            out.append(LogLinesArrived(LANE, 0, tuple(
                LogLine(0, f"2025-11-29T22:35:{i:02d}.000000000Z",
                        f"INFO Loading safetensors checkpoint shards: {i}/40")
                for i in range(1, 9)), 8))
        if step == 18:
            out.append(AlertRaised(Alert("thrash:dgx6", "thrash", "dgx6",
                                         ("ping answers, SSH probe failed 3x",),
                                         "3 SSH retries ~30 s apart, then `sparktui recover "
                                         "dgx6`", notified=True)))
    return out


def replay_app() -> ReplayApp:
    config = load_config(ROOT / "config.toml")
    clock = FixedClock()
    path = Path(tempfile.mkdtemp(prefix="sparktui-replay-")) / "night.jsonl.gz"
    recorder = Recorder(path, max_bytes=10_000_000, clock=clock)  # type: ignore[arg-type]
    recorder.open()
    for ev in night():
        if isinstance(ev, NodeSampled):
            clock.t = ev.snapshot.taken_at
        recorder.write(ev)
    recorder.close()
    source = ReplaySource(config, list(read_recording(path)), speed=1.0, start=T0 + 30 * 18)
    source.paused = True
    return ReplayApp(config, source)


def test_replay_paused_at_the_alert(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.5)

    assert snap_compare(replay_app(), terminal_size=(160, 48), run_before=run_before)
