"""A night file opened for replay is indexed, not decoded: its events'
times, classes and routes come from each line's start, an event is decoded
(and its schema checked) only when the replay needs it; a line whose body
does not say what its start said is counted, never replayed. Recordings are
untrusted: a field of the wrong type, a number that is no measurement, nesting
past the bound, a time far past the one before, a damaged member: each is
skipped and counted, never a traceback (mutations of valid lines included)."""

from __future__ import annotations

import gzip
import itertools
import json
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.core.config_load import load_config
from sparktui.core.state import NodeSnapshot
from sparktui.ops.events import WorkflowFinished
from sparktui.service import codec, recorded, stream
from sparktui.service.events import (
    Alert,
    AlertRaised,
    LogLinesArrived,
    NodeSampled,
    WorkflowProgressed,
)
from sparktui.service.recorded import Damage, open_sessions, read_recording
from sparktui.service.recording import Recorder
from sparktui.service.replay import ReplaySource
from sparktui.watch.follower import LogLine

from ..conftest import SHIPPED_CONFIG
from .test_recording import Clock, decompressed, events, opened, sampled, without_index
from .test_recording_damage import FullDisk, run_night

T0 = 1_764_450_000.0


def night(path: Path, polls: int, nodes: int = 3) -> Clock:
    clock = Clock()
    rec = Recorder(path, max_bytes=50_000_000, clock=clock)  # type: ignore[arg-type]
    rec.open()
    for i in range(polls):
        clock.t = T0 + 2 * i
        for n in range(nodes):
            rec.write(sampled(clock.t, node=f"dgx{n + 5}"))
        if i % 10 == 0:
            rec.write(LogLinesArrived("x", 1, (), i))
    rec.close()
    return clock


def test_opening_decodes_nothing_and_from_decodes_a_history_per_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "n.jsonl.gz"
    night(path, 300)
    decoded: list[object] = []
    real = recorded.decode

    def counting(data, hint=None):  # type: ignore[no-untyped-def]
        decoded.append(data.get("$"))
        return real(data, hint)

    monkeypatch.setattr(recorded, "decode", counting)
    monkeypatch.setattr(stream, "DEFAULT_HISTORY", 20)
    [session] = open_sessions(path)
    assert len(session) == 930 and decoded == []
    assert session.keys[:3] == ["dgx5", "dgx6", "dgx7"] and session.kinds[0] == "NodeSampled"
    config = load_config(SHIPPED_CONFIG)
    src = ReplaySource(config, session, start=T0 + 400)
    src._tail_over = 100
    src.seek(T0 + 400)
    assert len(decoded) <= 3 * 20 + 21  # a history per node and the log batches
    assert src.snapshot().get("dgx6").taken_at == T0 + 400  # type: ignore[union-attr]
    assert len(src.history("dgx6")) == 20
    src.seek(T0 + 450)  # on (folded: 75 node samples and 3 log batches)
    decoded.clear()
    src.seek(T0 + 420)  # back through what was just folded: nothing decoded again
    assert decoded == [] and src.snapshot().get("dgx6").taken_at == T0 + 420  # type: ignore[union-attr]


def test_a_line_whose_body_does_not_say_what_its_start_said_is_counted(tmp_path: Path) -> None:
    good = json.dumps({"t": T0, "e": codec.encode(sampled(T0, node="dgx5"))},
                      separators=(",", ":"))
    forged = good.replace('"node":"dgx5"', '"node":"dgx5","node":"dgx7"', 1)  # json: last wins
    path = tmp_path / "f.jsonl.gz"
    path.write_bytes(gzip.compress((good + "\n" + forged + "\n").encode()))
    damage = Damage()
    [session] = open_sessions(path, damage)
    assert session.keys == ["dgx5", "dgx5"] and damage.lines == 0
    assert session.event(0) is not None and session.event(1) is None
    assert damage.lines == 1


def _line(ev: object, t: float = T0) -> str:
    return json.dumps({"t": t, "e": codec.encode(ev)}, separators=(",", ":"))


def _wrong(ev: object, path: list[str | int], value: object) -> str:
    data = codec.encode(ev)
    here = data
    for step in path[:-1]:
        here = here[step]
    here[path[-1]] = value
    return json.dumps({"t": T0, "e": data}, separators=(",", ":"))


BAD_FIELDS = [
    (["snapshot", "node"], 5),
    (["snapshot", "taken_at"], "soon"),
    (["snapshot", "state"], "bogus"),
    (["snapshot", "probe", "meminfo", "total_kib"], "lots"),
    (["snapshot", "probe", "meminfo", "total_kib"], 1 << 80),
    (["snapshot", "probe", "psi", "full", "avg10"], 1e300),
    (["snapshot", "probe", "containers"], {"a": 1}),
    (["snapshot", "probe", "containers", 0, "labels"], ["x"]),
    (["snapshot", "probe", "containers", 0, "labels", "sparktui.lane"], 7),
    (["snapshot", "liveness"], "yes"),
    (["verdict", "level"], 99),
    (["last_point"], {"$": "Alert", "key": "k"}),
    (["snapshot"], {"$": "NoSuchClass"}),
]


@pytest.mark.parametrize(("where", "value"), BAD_FIELDS, ids=lambda x: str(x))
def test_a_field_of_the_wrong_type_is_counted_not_replayed(tmp_path: Path, where, value) -> None:
    ev = sampled(T0)
    path = tmp_path / "w.jsonl.gz"
    path.write_bytes(gzip.compress((_line(ev) + "\n" + _wrong(ev, where, value) + "\n"
                                    + _line(ev, T0 + 1) + "\n").encode()))
    damage = Damage()
    back = list(read_recording(path, damage))
    assert [t for t, _ in back] == [T0, T0 + 1] and damage.lines == 1
    assert all(isinstance(e.snapshot, NodeSnapshot) for _, e in back)  # type: ignore[union-attr]


def test_nesting_past_the_bound_in_a_free_field_is_counted(tmp_path: Path) -> None:
    deep: object = 1
    for _ in range(codec.MAX_DEPTH + 5):
        deep = [deep]
    ok = WorkflowProgressed(WorkflowFinished("wf", T0, "serve", "x", True, "", {"a": [[1]]}))
    bad = WorkflowProgressed(WorkflowFinished("wf", T0, "serve", "x", True, "", {"a": deep}))
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress((_line(ok) + "\n" + _line(bad) + "\n").encode()))
    damage = Damage()
    assert [e for _, e in read_recording(path, damage)] == [ok] and damage.lines == 1


def test_a_time_far_past_the_one_before_is_no_recorded_time(tmp_path: Path) -> None:
    ev = sampled(T0)
    lines = [_line(ev, T0), _line(ev, 9e10), _line(ev, T0 + 2)]
    path = tmp_path / "m.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    damage = Damage()
    sessions = open_sessions(path, damage)
    assert [s.times for s in sessions] == [[T0, T0 + 2]] and damage.lines == 1
    path.write_bytes(gzip.compress("\n".join([*lines[::2], _line(ev, 9e10)]).encode()))
    damage = Damage()  # the last line far past the one before: no recorded time either
    assert [s.times for s in open_sessions(path, damage)] == [[T0, T0 + 2]] and damage.lines == 1
    later = T0 + 13 * 3600  # a host asleep 13 h: the run goes on, a session of its own
    path.write_bytes(gzip.compress("\n".join(
        [_line(ev, T0), _line(ev, later), _line(ev, later + 2)]).encode()))
    damage = Damage()
    assert [s.times for s in open_sessions(path, damage)] == [[T0], [later, later + 2]]
    assert not damage


def test_lines_in_another_form_are_parsed_whole_and_replayed(tmp_path: Path) -> None:
    """A line not in the writer's compact form (hand-made, another writer):
    parsed at once, its event kept."""
    evs = events(T0)
    path = tmp_path / "o.jsonl.gz"
    path.write_bytes(gzip.compress("".join(
        json.dumps({"e": codec.encode(e), "t": T0 + i}) + "\n" for i, e in enumerate(evs)
    ).encode()))
    assert [e for _, e in read_recording(path)] == evs


@pytest.mark.timeout(120)
def test_two_hundred_megabytes_of_blank_lines_read_through(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl.gz"
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for _ in range(200):
            f.write(z.compress(b"\n" * (1 << 20)))
        f.write(z.compress((_line(sampled(T0)) + "\n").encode()))
        f.write(z.flush())
    damage = Damage()
    assert [t for t, _ in read_recording(path, damage)] == [T0] and not damage


def _valid_lines() -> list[bytes]:
    out = [json.dumps({"t": T0, "session": 1}).encode()]
    for i, e in enumerate(events(T0)):
        out.append(_line(e, T0 + i).encode())
    out.append(_line(AlertRaised(Alert("k", "fatal", "x", ("boom",), "stop")), T0 + 9).encode())
    return out


VALID = _valid_lines()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 10_000),
                          st.sampled_from([b"", b"0", b"-", b"\"", b"[", b"{", b"}", b"1e999",
                                           b"NaN", b"null", b"true", b"\\u0000", b"\xff"]),
                          st.integers(0, 3)), min_size=1, max_size=12))
def test_mutated_lines_are_events_or_counted_never_a_traceback(mutations) -> None:  # type: ignore[no-untyped-def]
    lines = list(VALID)
    for which, at, text, cut in mutations:
        line = lines[which]
        at %= len(line) + 1
        lines[which] = line[:at] + text + line[at + cut:]
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.jsonl.gz"
        path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
        damage = Damage()
        back = list(read_recording(path, damage))
        config = load_config(SHIPPED_CONFIG)
        for session in open_sessions(path, Damage()):
            src = ReplaySource(config, session)
            src.seek(session.times[-1])
            src.snapshot()
            src.alerts()
    assert len(back) + damage.lines <= len(VALID) - 1 + len(mutations)
    for _, ev in back:
        assert isinstance(ev, codec.EVENTS)
        if isinstance(ev, NodeSampled):
            assert isinstance(ev.snapshot.node, str) and isinstance(ev.snapshot.taken_at, float)


def test_a_missing_field_takes_its_default_or_the_line_is_counted(tmp_path: Path) -> None:
    ev = sampled(T0)
    data = codec.encode(ev)
    del data["snapshot"]["node"]  # required
    alert = codec.encode(AlertRaised(Alert("k", "fatal", "x", ("boom",), "stop")))
    del alert["at"], alert["alert"]["notified"]  # both have defaults
    path = tmp_path / "m.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(json.dumps({"t": T0 + i, "e": e}) for i, e in
                                             enumerate([data, alert])).encode()))
    damage = Damage()
    assert [e for _, e in read_recording(path, damage)] == [
        AlertRaised(Alert("k", "fatal", "x", ("boom",), "stop"))]
    assert damage.lines == 1


def eventful_night(path: Path, monkeypatch: pytest.MonkeyPatch, cut_back: bool) -> int:
    """Three runs into one night: one thinned, then stopped by its size bound;
    one whose disk fills (the member undone, or left torn when ``cut_back``
    fails; a gap line when it resumes); one whose clock overlaps the others'.
    Returns the file's size after the first run."""
    clock = Clock()
    rec = Recorder(path, max_bytes=20_000, clock=clock)  # type: ignore[arg-type]
    rec.open()
    for i in range(3000):
        clock.t = T0 + 2 * i
        rec.write(sampled(clock.t, node=f"dgx{i % 3 + 5}"))
        rec.write(LogLinesArrived("x", 1, (LogLine(1, None, f"line {i} " + "x" * 40),), i))
        if i % 100 == 0:
            rec.write(AlertRaised(Alert(f"a{i}", "thrash", "dgx6", (f"e{i}" * 50,), "r")))
    rec.close()
    assert rec.stopped
    first = path.stat().st_size
    disk = FullDisk(monkeypatch, cut_back=cut_back)
    rec = Recorder(path, max_bytes=50_000_000, clock=clock)  # type: ignore[arg-type]
    rec.open()
    for full in (False, True, False):
        rec.write(AlertRaised(Alert(f"mark{clock.t}", "t", "dgx6", (), "r")))  # flushes
        rec._queue.put(None)  # the writer catches up before the disk changes
        rec._thread.join()  # type: ignore[union-attr]
        disk.full = full
        rec._start_writer()
        for _ in range(40):
            clock.t += 1
            rec.write(sampled(clock.t))
    rec.close()
    disk.full = False
    clock.t = T0 + 30
    run_night(path, clock, 60)
    return first


@pytest.mark.parametrize("cut_back", [True, False])
def test_the_index_the_writer_kept_is_the_index_decompressing_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut_back: bool) -> None:
    path = tmp_path / "n.jsonl.gz"
    first_run = eventful_night(path, monkeypatch, cut_back)
    if cut_back:  # (a torn member stops gzip's own reader)
        with gzip.open(path, "rt") as f:
            text = f.read()
        assert text.count('"session"') == 3 and '"end"' in text and '"gap"' in text
    bare = without_index(path)
    read = decompressed(monkeypatch)
    from_index = opened(path)
    if cut_back:
        assert read == []  # every member from the index: nothing decompressed
    else:  # the torn member breaks the chain: from there the members are decompressed
        assert read and min(read) > first_run
    read.clear()
    assert from_index == opened(bare) and read
    sessions, damage = from_index
    assert len(sessions) == 3 and damage == Damage(pieces=0 if cut_back else 1)
    first = sessions[0]
    dgx5 = [t for t, kind, key in zip(*first[:3], strict=True)
            if kind == "NodeSampled" and key == "dgx5"]
    assert min(b - a for a, b in itertools.pairwise(dgx5)) < 30 <= max(
        b - a for a, b in itertools.pairwise(dgx5))  # thinned
    assert first[0][-1] < T0 + 2 * 2990  # and stopped
    assert all(ev is not None for s in sessions for ev in s[4])


def test_a_line_longer_than_the_bound_is_counted_from_the_index_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorded, "MAX_LINE", 1000)  # a node sample's line is longer
    path = tmp_path / "n.jsonl.gz"
    night(path, 20)
    read = decompressed(monkeypatch)
    sessions, damage = opened(path)
    assert read == [] and damage.lines == 60 and len(sessions[0][0]) == 2
    assert opened(without_index(path)) == (sessions, damage)
