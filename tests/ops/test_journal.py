"""The journal: one fsynced line per entry, torn lines skipped, workflows folded,
unfinished ones found; concurrent writers never interleave lines."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from sparktui.ops.journal import Journal, JournalError


class Tick:
    def __init__(self, t: float = 1_796_421_600.0) -> None:
        self.t = t

    def time(self) -> float:
        self.t += 1.0
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


def test_entries_round_trip_and_the_file_is_private(tmp_path):
    j = Journal(tmp_path / "state" / "journal.jsonl", Tick())
    j.append("w1", "begin", workflow="power-cycle", target="dgx6",
             detail={"entity": "switch.dgx6"})
    j.append("w1", "intent", step="plug off", target="switch.dgx6", action="POST ...")
    (e1, e2) = j.entries()
    assert e1.workflow == "power-cycle" and e1.detail == {"entity": "switch.dgx6"}
    assert e2.step == "plug off" and e2.ok is None
    assert (j.path.stat().st_mode & 0o777) == 0o600
    assert all(json.loads(line) for line in j.path.read_text().splitlines())


def test_a_torn_last_line_is_skipped_and_nothing_before_it_is_lost(tmp_path):
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("w1", "begin", workflow="stop", target="lane")
    j.append("w1", "intent", step="stop rank 1", target="dgx6")
    with open(j.path, "ab") as f:
        f.write(b'{"t": 1.0, "wf": "w1", "kind": "outc')  # the crash cut this write
    assert [e.kind for e in j.entries()] == ["begin", "intent"]
    j.append("w1", "outcome", step="stop rank 1", target="dgx6", ok=True)
    # the next entry starts on a line of its own: only the torn fragment is lost
    assert [e.kind for e in j.entries()] == ["begin", "intent", "outcome"]


def test_fold_pairs_intents_with_outcomes_and_finds_the_unfinished(tmp_path):
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("a", "begin", workflow="power-cycle", target="dgx6")
    j.append("a", "intent", step="plug off", target="switch.dgx6")
    j.append("a", "outcome", step="plug off", target="switch.dgx6", ok=True)
    j.append("a", "intent", step="wait off", target="dgx6")
    j.append("b", "begin", workflow="stop", target="lane")
    j.append("b", "end", workflow="stop", target="lane", ok=True, message="stopped")
    (a,) = j.unfinished()
    assert a.wf == "a" and a.done("plug off", "switch.dgx6")
    assert [s.step for s in a.steps if s.ok is None] == ["wait off"]
    assert "plug off [switch.dgx6] done" in a.describe()
    assert "wait off [dgx6] in doubt" in a.describe()
    b = next(w for w in j.workflows() if w.wf == "b")
    assert b.finished and b.ok and b.message == "stopped"
    assert [w.wf for w in j.workflows(since=j.entries()[4].t)] == ["b"]


WRITER = """
import sys
from sparktui.ops.journal import Journal
from pathlib import Path
j = Journal(Path(sys.argv[1]))
for i in range(200):
    j.append(sys.argv[2], "note", message="x" * (i % 50) + str(i))
"""


def test_two_processes_appending_never_interleave(tmp_path):
    path = tmp_path / "journal.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), wf])
             for wf in ("p1", "p2")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    entries = Journal(path).entries()
    assert len(entries) == 400
    assert sum(1 for e in entries if e.wf == "p1") == 200
    assert len(path.read_text().splitlines()) == 400


def test_a_nan_or_absurd_line_is_skipped_with_a_reason(tmp_path, caplog):
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("w1", "begin", workflow="power-cycle", target="dgx6")
    with open(j.path, "ab") as f:
        f.write(b'{"t": NaN, "wf": "w1", "kind": "intent", "step": "plug off"}\n')
        f.write(b'{"t": 1e300, "wf": "w1", "kind": "intent", "step": "plug off"}\n')
        f.write(b'{"t": 1e999, "wf": "w1", "kind": "end"}\n')
        f.write(b'{"t": 5.0, "wf": "w1", "kind": "end", "ok": "maybe"}\n')
    j.append("w1", "intent", step="plug off", target="switch.dgx6")
    assert [e.kind for e in j.entries()] == ["begin", "intent"]
    assert [s.split(":")[0] for s in j.skipped] == ["line 2", "line 3", "line 4", "line 5"]
    assert "NaN" in j.skipped[0] and "1e+300" in j.skipped[1]
    j.entries()
    warned = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(warned) == 4 and warned[0].endswith("line 2 skipped: NaN is not a number a "
                                                   "journal holds")
    (w,) = j.unfinished()
    assert w.steps[0].step == "plug off"


def test_a_short_write_is_continued(tmp_path, monkeypatch):
    from sparktui.ops import journal as journal_mod

    real = journal_mod._write
    monkeypatch.setattr(journal_mod, "_write", lambda fd, data: real(fd, bytes(data[:7])))
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("w1", "begin", workflow="stop", target="lane", message="x" * 100)
    assert [e.message for e in j.entries()] == ["x" * 100]


@pytest.mark.parametrize(("err", "says"), [(errno.ENOSPC, "the disk is full"),
                                          (errno.EROFS, "read-only"),
                                          (errno.EACCES, "permission denied")])
def test_a_failed_write_refuses_with_the_reason_and_leaves_no_partial_line(
        tmp_path, monkeypatch, err, says):
    from sparktui.ops import journal as journal_mod

    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("w1", "begin", workflow="stop", target="lane")
    before = j.path.read_bytes()
    real = journal_mod._write

    def half_then_fail(fd, data):
        if len(data) > 10:
            return real(fd, bytes(data[:10]))  # part of the line reaches the disk
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(journal_mod, "_write", half_then_fail)
    with pytest.raises(JournalError, match=f"cannot write the journal {j.path}.*{says}.*"
                                           f"refusing to act"):
        j.append("w1", "intent", step="stop rank 0", target="dgx6")
    assert j.path.read_bytes() == before
    monkeypatch.setattr(journal_mod, "_write", real)
    j.append("w1", "intent", step="stop rank 0", target="dgx6")
    assert [e.kind for e in j.entries()] == ["begin", "intent"] and not j.skipped


def test_the_token_never_reaches_the_journal(tmp_path):
    from sparktui.core.redact import register_secret

    register_secret("tok-abcdef-123456")
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("w1", "outcome", step="plug off", target="switch.dgx6", ok=False,
             message="HTTP 502: Authorization: Bearer tok-abcdef-123456",
             detail={"body": "token tok-abcdef-123456", "n": float("nan")})
    text = j.path.read_text()
    assert "tok-abcdef-123456" not in text and "Bearer" not in text
    assert j.entries()[0].detail["n"] == "nan"


def _full_until_released(monkeypatch, j: Journal):  # type: ignore[no-untyped-def]
    """From now on the disk is full: only the space the reserve frees is writable."""
    from sparktui.ops import journal as journal_mod

    real = journal_mod._write

    def write(fd, data):  # type: ignore[no-untyped-def]
        if j.reserve_path.exists():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(journal_mod, "_write", write)


def test_the_reserve_is_held_once_and_private(tmp_path):
    from sparktui.ops.journal import RESERVE_BYTES

    j = Journal(tmp_path / "state" / "journal.jsonl", Tick())
    j.reserve()
    st = j.reserve_path.stat()
    assert st.st_blocks * 512 >= RESERVE_BYTES and st.st_mode & 0o777 == 0o600
    j.reserve()  # held already: not made again
    assert j.reserve_path.stat().st_mtime_ns == st.st_mtime_ns


def test_a_full_disk_releases_the_reserve_for_the_way_out_only(tmp_path, monkeypatch):
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("w1", "begin", workflow="power-cycle", target="dgx6")
    j.append("w1", "intent", step="plug off", target="switch.dgx6")
    j.reserve()
    _full_until_released(monkeypatch, j)
    # the plug went off: its confirmation is written from the reserve
    j.append("w1", "outcome", step="plug off", target="switch.dgx6", ok=True)
    assert not j.reserve_path.exists()
    # the workflow goes no further ...
    with pytest.raises(JournalError, match=r"the disk is full.*reserve.*released during w1.*"
                                           r"wait off is not done"):
        j.append("w1", "intent", step="wait off", target="dgx6")
    # ... but its way out is journaled
    with j.way_out():
        j.append("w1", "intent", step="plug on", target="switch.dgx6")
    j.append("w1", "outcome", step="plug on", target="switch.dgx6", ok=True)
    j.append("w1", "end", workflow="power-cycle", target="dgx6", ok=False, message="disk full")
    (w,) = j.workflows()
    assert [(s.step, s.ok) for s in w.steps] == [("plug off", True), ("plug on", True)]
    assert w.finished and not j.unfinished()


def test_a_forward_intent_at_the_full_disk_is_not_written(tmp_path, monkeypatch):
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("w1", "begin", workflow="power-cycle", target="dgx6")
    j.reserve()
    _full_until_released(monkeypatch, j)
    with pytest.raises(JournalError, match="the disk is full"):
        j.append("w1", "intent", step="wait off", target="dgx6")
    assert not j.reserve_path.exists()
    assert [e.kind for e in j.entries()] == ["begin"]


def test_without_a_reserve_a_full_disk_refuses_everything(tmp_path, monkeypatch):
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.append("w1", "begin", workflow="power-cycle", target="dgx6")
    from sparktui.ops import journal as journal_mod

    monkeypatch.setattr(journal_mod, "_write", lambda fd, data: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    for kind in ("outcome", "end"):
        with pytest.raises(JournalError, match="the disk is full"):
            j.append("w1", kind, step="plug off", target="switch.dgx6", ok=True)


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EDQUOT])
def test_no_room_for_the_reserve_refuses_with_the_reason(tmp_path, monkeypatch, err):
    from sparktui.ops import journal as journal_mod

    def nearly_full(fd, offset, length):  # type: ignore[no-untyped-def]
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(journal_mod, "_allocate", nearly_full)
    j = Journal(tmp_path / "journal.jsonl", Tick())
    with pytest.raises(JournalError, match=r"cannot reserve 256 KiB.*refusing to start"):
        j.reserve()
    assert not j.reserve_path.exists()


def test_a_filesystem_without_fallocate_gets_written_blocks(tmp_path, monkeypatch):
    from sparktui.ops import journal as journal_mod

    def unsupported(fd, offset, length):  # type: ignore[no-untyped-def]
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(journal_mod, "_allocate", unsupported)
    j = Journal(tmp_path / "journal.jsonl", Tick())
    j.reserve()
    assert j.reserve_path.stat().st_size == journal_mod.RESERVE_BYTES
