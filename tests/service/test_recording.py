"""The night's recording: events round-trip exactly, the file is size bounded
(thinned, then only the incident's events, then stopped with a last line),
and a torn end (the console killed mid-write) reads back quietly."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path
from types import MappingProxyType

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
from sparktui.ops.events import GuardsEvaluated, WorkflowFinished
from sparktui.service.events import (
    Alert,
    AlertRaised,
    LaneChanged,
    LogLinesArrived,
    NodeSampled,
    WorkflowProgressed,
)
from sparktui.service.lanes import LaneView
from sparktui.service.recorded import read_recording
from sparktui.service.recording import Recorder, night_path
from sparktui.watch.follower import LogLine
from sparktui.watch.readiness import RankContainer


class Clock:
    def __init__(self) -> None:
        self.t = 1_764_450_000.0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


def sampled(t: float, node: str = "dgx6", state: NodeState = NodeState.ONLINE,
            level: ThrashLevel = ThrashLevel.OK) -> NodeSampled:
    probe = ProbeResult(
        meminfo=MemInfo(127_000_000, 5_000_000), loadavg=LoadAvg(3.1, 2.0, 1.0),
        psi=Psi(PsiLine(30.1, 20.0, 5.0, 123), PsiLine(12.0, 8.0, 1.0, 45)),
        kernel="6.17.0-1031-nvidia",
        containers=(ContainerInfo("sparktui-x-r1", "vllm", "running", "Up 5 minutes",
                                  MappingProxyType({"sparktui.lane": "x"})),))
    return NodeSampled(NodeSnapshot(node, state, t, probe, liveness=True),
                       ThrashVerdict(node, level, ("PSI some 30%",), "reduce load", 0),
                       HistoryPoint(t, 5_000_000, 127_000_000, 30.1, 12.0))


def events(t: float) -> list:  # type: ignore[type-arg]
    rc = RankContainer(1, "dgx6", "sparktui-x-r1", 2, 8000, "vllm", True)
    return [
        sampled(t),
        LaneChanged(LaneView("x", "4nodes-switch-b", "vllm", 8000, (rc,), phase="loading",
                             progress=0.5)),
        LogLinesArrived("x", 1, (LogLine(1, "2026-11-29T22:45:01.1Z", "hello \x1b[0m"),), 1),
        AlertRaised(Alert("thrash:dgx6", "thrash", "dgx6", ("ping answers",), "recover",
                          notified=True)),
        WorkflowProgressed(GuardsEvaluated("wf1", t, ("ok",), ())),
        WorkflowProgressed(WorkflowFinished("wf1", t, "serve", "x", False, "failed",
                                            {"failure": {"rank": 1}})),
    ]


def test_events_round_trip(tmp_path: Path) -> None:
    clock = Clock()
    path = night_path(tmp_path, clock.t)
    rec = Recorder(path, max_bytes=10_000_000, clock=clock)  # type: ignore[arg-type]
    rec.open()
    sent = events(clock.t)
    for ev in sent:
        rec.write(ev)
    rec.close()
    back = [e for _, e in read_recording(path)]
    assert back == sent
    assert back[0].snapshot.probe.containers[0].labels["sparktui.lane"] == "x"
    assert back[0].verdict.level is ThrashLevel.OK and back[0].snapshot.state is NodeState.ONLINE


def test_a_torn_end_reads_back_what_is_whole(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    rec = Recorder(path, max_bytes=10_000_000, clock=clock)  # type: ignore[arg-type]
    rec.open()
    for _i in range(200):
        clock.t += 2
        rec.write(sampled(clock.t))
    rec.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    back = list(read_recording(path))
    assert 0 < len(back) < 200
    assert all(isinstance(e, NodeSampled) for _, e in back)


def test_size_bound_thins_then_keeps_the_incident_then_stops(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    limit = 40_000
    rec = Recorder(path, max_bytes=limit, clock=clock)  # type: ignore[arg-type]
    rec.open()
    for n in range(20_000):
        clock.t += 2
        rec.write(sampled(clock.t, node=f"dgx{n % 8 + 1}"))
        rec.write(LogLinesArrived("x", 1, (LogLine(1, None, f"line {n} " + "x" * 40),), n))
    rec.close()  # the writer thread has written every event queued
    plateau = path.stat().st_size
    assert 0.85 * limit < plateau < limit and not rec.stopped  # past 90 %: steady state is dropped
    rec.open()  # a next console run appends
    for n in range(5_000):
        if rec.stopped:
            break
        clock.t += 2
        rec.write(AlertRaised(Alert(f"thrash:dgx{n}", "thrash", f"dgx{n}", (f"e{n}" * 20,), "r")))
    rec.write(AlertRaised(Alert("late", "thrash", "dgx1", ("after the end",), "r")))
    rec.close()
    assert rec.stopped
    assert path.stat().st_size < limit * 1.2
    with gzip.open(path, "rt") as f:
        assert "size bound reached" in f.read().splitlines()[-1]
    back = list(read_recording(path))
    times = [t for t, e in back if isinstance(e, NodeSampled) and e.snapshot.node == "dgx1"]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) < 30 and max(gaps) >= 30  # every poll at first, then thinned
