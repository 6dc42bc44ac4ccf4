"""The night's recording: events round-trip exactly, the file is size bounded
(thinned, then only the incident's events, then stopped with a last line),
and a torn end (the console killed mid-write) reads back quietly."""

from __future__ import annotations

import errno
import gzip
import itertools
import json
import logging
import os
import shutil
from pathlib import Path
from types import MappingProxyType

import pytest

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
from sparktui.service import recorded, recording
from sparktui.service.events import (
    Alert,
    AlertRaised,
    LaneChanged,
    LogLinesArrived,
    NodeSampled,
    WorkflowProgressed,
)
from sparktui.service.lanes import LaneView
from sparktui.service.recorded import Damage, open_sessions, read_recording
from sparktui.service.recordindex import index_path
from sparktui.service.recording import Recorder, night_path
from sparktui.watch.follower import LogLine
from sparktui.watch.readiness import RankContainer

T0 = 1_764_450_000.0


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


def opened(path: Path) -> tuple[list[tuple[object, ...]], Damage]:
    """A night's index, event for event (time, class, route, where its line
    lies, the event decoded), and what was found damaged on the way."""
    damage = Damage()
    sessions = open_sessions(path, damage)
    return [(s.times, s.kinds, s.keys, s._where, [s.event(i) for i in range(len(s))])
            for s in sessions], damage


def without_index(path: Path) -> Path:
    """The same night's bytes with no index beside them."""
    bare = path.with_name("bare-" + path.name)
    shutil.copyfile(path, bare)
    return bare


def decompressed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The member offsets of the lines the index reads by decompressing."""
    read: list[int] = []
    real = recorded._lines

    def counting(f, damage, origin):  # type: ignore[no-untyped-def]
        for line in real(f, damage, origin):
            read.append(line[0])
            yield line

    monkeypatch.setattr(recorded, "_lines", counting)
    return read


def test_an_index_write_that_fails_stops_the_index_never_the_night(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
        ) -> None:
    """The index is a cache: a write of it that fails is logged once, the
    night is recorded whole, and the index vouches for what it held."""
    caplog.set_level(logging.WARNING, logger="sparktui.service.recording")
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    rec = Recorder(path, max_bytes=50_000_000, clock=clock)  # type: ignore[arg-type]
    real = recording.write_all
    written = []

    def write_all(fd: int, data: bytes) -> None:
        if fd == rec._index_fd and len(written) >= 3:
            os.write(fd, data[:10])  # torn, like a full disk leaves it
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if fd == rec._index_fd:
            written.append(data)
        real(fd, data)

    monkeypatch.setattr(recording, "write_all", write_all)
    rec.open()
    for i in range(100):
        clock.t += 1
        rec.write(sampled(clock.t))
        if i % 10 == 9:
            rec.write(AlertRaised(Alert(f"a{i}", "thrash", "dgx6", ("x",), "r")))
    rec.close()
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["recording index stopped"]
    assert len(written) == 3 and rec._index_fd is None
    read = decompressed(monkeypatch)
    back = opened(path)
    assert len(back[0][0][0]) == 110 and not back[1]
    assert read and min(read) == json.loads(written[-1])["at"] + json.loads(written[-1])["n"]
    assert back == opened(without_index(path))
    torn = index_path(path).read_bytes()
    monkeypatch.setattr(recording, "write_all", real)
    rec.open()  # a next run: the index does not end where the night does, so none tonight
    rec.write(sampled(clock.t + 1))
    rec.close()
    assert index_path(path).read_bytes() == torn and opened(path) == opened(without_index(path))


def test_two_writers_on_one_night_leave_an_index_trusted_only_where_it_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A console and a sentinel appending to one night at once: each record
    names the offset its member really went to; where the other's member and
    record came between one's member and its record, the chain breaks and
    the reader decompresses from there."""
    monkeypatch.setattr(Recorder, "_start_writer", lambda self: None)  # flushed by hand
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    a = Recorder(path, max_bytes=50_000_000, clock=clock)  # type: ignore[arg-type]
    b = Recorder(path, max_bytes=50_000_000, clock=clock)  # type: ignore[arg-type]
    a.open()
    b.open()
    between = {"at": 30}
    a_index = a._index

    def late_index(member: bytes, lines: list[bytes], metas: list[object]) -> None:
        if clock.t == between["at"] + T0:  # b writes a member (and its record) first
            b._flush(clock.t, force=True)
        a_index(member, lines, metas)  # type: ignore[arg-type]

    monkeypatch.setattr(a, "_index", late_index)
    for i in range(60):
        clock.t = T0 + i + 1
        for rec, node in ((a, "dgx1"), (b, "dgx2")):
            rec._record(clock.t, sampled(clock.t, node=node))
            if i % 5 == 4:
                rec._flush(clock.t, force=True)
    for rec in (a, b):
        rec._flush(clock.t, force=True)
        rec.close()
    records = [json.loads(x) for x in index_path(path).read_bytes().splitlines()]
    starts = sorted(r["at"] for r in records)
    assert starts[0] == 0 and [r["at"] + r["n"] for r in sorted(records, key=lambda r: r["at"])] \
        == [*starts[1:], path.stat().st_size]  # every member of either, where it went
    read = decompressed(monkeypatch)
    back = opened(path)
    assert read and min(read) > 0  # the first members from the index, from b's early one on not
    assert back == opened(without_index(path)) and not back[1]
    assert sum(len(s[0]) for s in back[0]) == 120
