"""A recording a full disk, a kill or a hostile file cannot ruin: each flush
is its own gzip member, a write that fails with ENOSPC is undone and logged
once and the recording resumes when space returns; a damaged member is
skipped and counted; the file is 0600 in a 0700 dir whatever the umask and a
planted symlink is never followed; a line that is not an event (a time that
is not a finite epoch, too deep, not an object) is skipped and counted."""

from __future__ import annotations

import errno
import gzip
import json
import logging
import os
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.service import recorded, recording
from sparktui.service.events import Alert, AlertRaised, NodeSampled
from sparktui.service.recorded import Damage, open_sessions, read_recording
from sparktui.service.recordindex import index_path
from sparktui.service.recording import Recorder, night_path

from .test_recording import Clock, decompressed, opened, sampled, without_index


def run_night(path: Path, clock: Clock, n: int) -> None:
    rec = Recorder(path, max_bytes=50_000_000, clock=clock)  # type: ignore[arg-type]
    rec.open()
    for i in range(n):
        clock.t += 2
        rec.write(sampled(clock.t))
        if i % 10 == 9:
            rec.write(AlertRaised(Alert(f"a{i}", "thrash", "dgx6", ("x",), "r")))
    rec.close()


def test_a_corrupt_middle_member_is_skipped_counted_and_said(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture
                                                            ) -> None:
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    run_night(path, clock, 100)
    first = list(read_recording(path))
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 40] = b"\xff" * 40  # inside one member, headers around it intact
    path.write_bytes(bytes(data))
    damage = Damage()
    back = list(read_recording(path, damage))
    assert damage.pieces == 1
    assert len(first) - 15 < len(back) < len(first)  # one member lost, not the rest
    assert back[-1] == first[-1]
    caplog.set_level(logging.WARNING)
    list(read_recording(path))
    assert any("1 damaged piece skipped" in r.getMessage() for r in caplog.records)


def test_a_torn_member_then_a_later_run_reads_both(tmp_path: Path) -> None:
    """A kill mid-member, then a next console run appending to the same night:
    the later run's events are readable (they were lost behind a CRC error)."""
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    run_night(path, clock, 50)
    data = path.read_bytes()
    path.write_bytes(data[:-30])  # the last member cut short
    run_night(path, clock, 50)
    damage = Damage()
    back = list(read_recording(path, damage))
    later = [t for t, _ in back if t > clock.t - 100]
    assert later and back[-1][0] == clock.t
    assert damage.pieces == 1 and not damage.torn_end


class FullDisk:
    """os.write as a disk that fills: while ``full`` a write puts half its
    bytes down, then fails ENOSPC (the torn member a real disk leaves)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, cut_back: bool = True) -> None:
        self.full = False
        real_write, real_truncate = os.write, os.ftruncate

        def write(fd: int, data: bytes | memoryview) -> int:
            if self.full and len(data) > 1:
                real_write(fd, bytes(data[: len(data) // 2]))
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_write(fd, data)

        def ftruncate(fd: int, size: int) -> None:
            if not cut_back:
                raise OSError(errno.EIO, "cannot")
            real_truncate(fd, size)

        monkeypatch.setattr(recording.os, "write", write)
        monkeypatch.setattr(recording.os, "ftruncate", ftruncate)


@pytest.mark.parametrize("cut_back", [True, False])
def test_a_full_disk_pauses_with_one_line_and_resumes(tmp_path: Path, cut_back: bool,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    caplog.set_level(logging.DEBUG, logger="sparktui.service.recording")
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    disk = FullDisk(monkeypatch, cut_back=cut_back)
    rec = Recorder(path, max_bytes=50_000_000, clock=clock)  # type: ignore[arg-type]
    rec.open()
    phases = [(0, 100), (1, 100), (0, 100)]  # before, during and after the fill
    bounds = []
    for full, n in phases:
        rec.write(AlertRaised(Alert(f"mark{len(bounds)}", "t", "dgx6", (), "r")))  # flushes
        rec._queue.put(None)  # let the writer catch up before the disk changes
        rec._thread.join()  # type: ignore[union-attr]
        disk.full = bool(full)
        bounds.append(clock.t)
        rec._start_writer()
        for _ in range(n):
            clock.t += 1
            rec.write(sampled(clock.t))
    rec.close()
    disk.full = False
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().split(":")[0] for r in warnings] == \
        ["recording paused", "recording resumed"]
    assert not any(r.exc_info for r in caplog.records)  # no traceback per event
    damage = Damage()
    back = list(read_recording(path, damage))
    times = [t for t, e in back if isinstance(e, NodeSampled)]
    assert any(t < bounds[1] for t in times)  # up to the fill
    assert any(t > bounds[2] + 90 for t in times)  # and after it
    assert not any(bounds[1] < t <= bounds[2] for t in times)
    assert damage.pieces == (0 if cut_back else 1)
    with gzip.open(path, "rt") as f:  # and a gap line says what was lost
        gaps = [json.loads(x) for x in f if '"gap"' in x] if cut_back else []
    if cut_back:
        assert gaps and gaps[0]["gap"] >= 99 and "space" in gaps[0]["why"]


def test_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        clock = Clock()
        path = night_path(tmp_path, clock.t)
        run_night(path, clock, 3)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(index_path(path).stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    clock = Clock()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    path = night_path(state, clock.t)
    path.parent.symlink_to(elsewhere)  # the recordings dir
    with pytest.raises(OSError):
        Recorder(path, max_bytes=1_000_000, clock=clock).open()  # type: ignore[arg-type]
    path.parent.unlink()
    path.parent.mkdir()
    target = elsewhere / "victim"
    target.write_bytes(b"keep")
    path.symlink_to(target)  # the night file
    with pytest.raises(OSError):
        Recorder(path, max_bytes=1_000_000, clock=clock).open()  # type: ignore[arg-type]
    assert target.read_bytes() == b"keep" and list(elsewhere.iterdir()) == [target]
    path.unlink()
    index_path(path).symlink_to(target)  # the night's index: the night is recorded without it
    run_night(path, clock, 20)
    assert target.read_bytes() == b"keep" and index_path(path).is_symlink()
    assert len(list(read_recording(path))) == 22


def _hostile(path: Path, lines: list[str]) -> None:
    path.write_bytes(gzip.compress("".join(x + "\n" for x in lines).encode()))


def test_lines_that_are_not_events_are_skipped_and_counted(tmp_path: Path) -> None:
    good = json.dumps({"t": 1_764_450_000.0, "e": recording.encode(sampled(1_764_450_000.0))})
    bad = [
        '{"t": -1e18, "e": {"$": "Alert", "key": "k"}}',
        '{"t": 1e308, "e": null}',
        '{"t": NaN, "e": null}',
        '{"t": "soon", "e": null}',
        '{"t": true, "e": null}',
        "[" * 100_000 + "]" * 100_000,
        '{"t": 1764450001, "e": ' + "[" * 50_000 + "]" * 50_000 + "}",
        "42",
        "not json",
    ]
    path = tmp_path / "h.jsonl.gz"
    _hostile(path, [good, *bad, good])
    damage = Damage()
    back = list(read_recording(path, damage))
    assert len(back) == 2 and damage.lines == len(bad)


def test_an_overlong_line_is_skipped_without_holding_it(tmp_path: Path) -> None:
    ev = sampled(1_764_450_000.0)
    good = json.dumps({"t": 1_764_450_000.0, "e": recording.encode(ev)})
    path = tmp_path / "h.jsonl.gz"
    _hostile(path, ['{"t": 1, "x": "' + "a" * (3 << 20) + '"}', good])
    damage = Damage()
    assert list(read_recording(path, damage)) == [(1_764_450_000.0, ev)]
    assert damage.lines == 1


def test_blank_lines_are_read_through(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n" * (20 << 20)))
    assert list(read_recording(path)) == []


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (root only: skipped elsewhere)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                          capture_output=True, check=False, timeout=10)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False, timeout=10)


def test_a_real_full_disk_leaves_a_night_that_replays_past_the_fill(
        tiny_disk: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sparktui.service.recording")
    clock = Clock()
    path = night_path(tiny_disk, clock.t)
    run_night(path, clock, 30)
    filled_at = clock.t
    filler = tiny_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    for size in (4096, 1):  # eat every byte left
        try:
            while True:
                os.write(fd, b"\0" * size)
        except OSError:
            pass
    os.close(fd)
    run_night(path, clock, 30)  # a run while the disk is full
    assert any(r.getMessage().startswith("recording paused") for r in caplog.records)
    filler.unlink()
    back_at = clock.t
    run_night(path, clock, 30)
    damage = Damage()
    times = [t for t, _ in read_recording(path, damage)]
    assert any(t <= filled_at for t in times) and any(t > back_at for t in times)
    assert not damage.pieces
    assert not any(r.exc_info for r in caplog.records)


def test_each_run_is_its_own_session_even_when_clocks_overlap(tmp_path: Path) -> None:
    """Two demo runs in one night file, their simulated clocks overlapping:
    two sessions, each in its own time order, not one interleaved night."""
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    start = clock.t
    run_night(path, clock, 40)
    clock.t = start + 10  # the next run's simulated clock starts where the first did
    run_night(path, clock, 40)
    sessions = recorded.read_sessions(path)
    assert [len(s) for s in sessions] == [44, 44]
    assert all(s[0][0] < start + 20 for s in sessions)
    unmarked = tmp_path / "old.jsonl.gz"  # a file from before runs were marked
    with gzip.open(path, "rt") as f:
        lines = [x for x in f if '"session"' not in x]
    unmarked.write_bytes(gzip.compress("".join(lines).encode()))
    assert [len(s) for s in recorded.read_sessions(unmarked)] == [44, 44]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in index_path(path).read_bytes().splitlines()]


def _garble(idx: bytes) -> bytes:
    lines = idx.splitlines(keepends=True)
    lines[len(lines) // 2] = b'{"at": not json\n'
    return b"".join(lines)


def _off_by_one(idx: bytes) -> bytes:
    lines = idx.splitlines(keepends=True)
    data = json.loads(lines[3])
    data["l"][1][-1] += 1  # a line's length: the lengths no longer add up to the member's
    lines[3] = json.dumps(data).encode() + b"\n"
    return b"".join(lines)


def _past_the_file(idx: bytes) -> bytes:
    lines = idx.splitlines(keepends=True)
    data = json.loads(lines[5])
    data["n"] += 1 << 30
    lines[5] = json.dumps(data).encode() + b"\n"
    return b"".join(lines)


def _swapped(idx: bytes) -> bytes:
    lines = idx.splitlines(keepends=True)
    lines[2], lines[3] = lines[3], lines[2]
    return b"".join(lines)


SPOILED = {
    "torn": lambda idx: idx[:len(idx) * 3 // 5],
    "garbled": _garble,
    "lengths that do not add up": _off_by_one,
    "a member past the file": _past_the_file,
    "out of order": _swapped,
    "empty": lambda idx: b"",
    "not json at all": lambda idx: b"\xff" * 1000,
}


@pytest.mark.parametrize("how", list(SPOILED))
def test_a_spoiled_index_gives_the_night_no_index_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    run_night(path, clock, 100)
    run_night(path, clock, 100)
    bare = without_index(path)
    idx = index_path(path)
    idx.write_bytes(SPOILED[how](idx.read_bytes()))
    read = decompressed(monkeypatch)
    spoiled = opened(path)
    assert read  # what the index could not vouch for was decompressed
    assert spoiled == opened(bare) and not spoiled[1] and len(spoiled[0]) == 2


@pytest.mark.parametrize("how", ["cut mid-member", "cut at a member", "another night's index"])
def test_an_index_of_more_or_other_than_the_night_is_not_trusted_past_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    run_night(path, clock, 100)
    if how == "another night's index":
        other = tmp_path / "other.jsonl.gz"
        elsewhen = Clock()
        elsewhen.t += 0.5
        run_night(other, elsewhen, 100)  # as many events, other times
        os.replace(index_path(other), index_path(path))
    else:
        member = _records(path)[-3]
        cut = member["at"] + (member["n"] - 10 if how == "cut mid-member" else 0)
        with open(path, "r+b") as f:
            f.truncate(cut)  # cut back by hand: the index still holds what was after
    read = decompressed(monkeypatch)
    back = opened(path)
    assert bool(read) == (how != "cut at a member")
    assert back == opened(without_index(path))
    assert back[1] == Damage(torn_end=how == "cut mid-member")


@pytest.mark.parametrize("planted", ["symlink", "fifo", "directory"])
def test_an_index_that_is_not_a_regular_file_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str) -> None:
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    run_night(path, clock, 100)
    idx = index_path(path)
    good = tmp_path / "elsewhere.idx"
    os.replace(idx, good)
    if planted == "symlink":
        idx.symlink_to(good)  # a good index there: read, it would spare the decompressing
    elif planted == "fifo":
        os.mkfifo(idx)  # opened for reading, it would block until a writer came
    else:
        idx.mkdir()
    read = decompressed(monkeypatch)
    back = opened(path)
    assert read and back == opened(without_index(path))


def test_a_damaged_piece_the_index_covers_is_found_when_decoded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
        ) -> None:
    clock = Clock()
    path = tmp_path / "n.jsonl.gz"
    run_night(path, clock, 100)
    first = list(read_recording(path))
    records = _records(path)
    hit = records[len(records) // 2]
    data = bytearray(path.read_bytes())
    data[hit["at"] + 12:hit["at"] + 24] = b"\xff" * 12  # its deflate data: header, trailer whole
    path.write_bytes(bytes(data))
    read = decompressed(monkeypatch)
    damage = Damage()
    [session] = open_sessions(path, damage)
    assert not damage and read == []  # the index covers it: not decompressed to open
    lost = sum(1 for item in hit["l"] if isinstance(item, list) and len(item) == 4)
    back = [(t, ev) for t, ev in session]
    assert sum(ev is None for _, ev in back) == lost > 0
    assert damage == Damage(pieces=1)  # once, however many of its events were asked for
    assert [x for x in back if x[1] is not None] == [x for x in first if x[0] not in {
        item[0] for item in hit["l"] if isinstance(item, list) and len(item) == 4}]
    caplog.set_level(logging.WARNING)
    list(read_recording(path))
    assert any("1 damaged piece skipped" in r.getMessage() for r in caplog.records)
