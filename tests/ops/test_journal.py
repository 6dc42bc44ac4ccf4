"""The journal: one fsynced line per entry, torn lines skipped, workflows folded,
unfinished ones found; concurrent writers never interleave lines."""

from __future__ import annotations

import json
import subprocess
import sys

from sparktui.ops.journal import Journal


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
    assert [s.step for s in a.in_doubt] == ["wait off"]
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
