"""Each journal entry says which clock stamped it (issue 25: one state dir
holds a demo's entries on its simulator's clock and a shell's on the wall's,
and a bundle listed them all as its own, on one timeline)."""

from __future__ import annotations

import json
from pathlib import Path

from sparktui.core.clock import SystemClock
from sparktui.core.incident import NODES, OURS, Clocks
from sparktui.ops.bundle import journal_stamp
from sparktui.ops.journal import SIMULATED, Entry, Journal
from sparktui.sim.clock import SimClock


def test_an_entry_says_its_clock_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    Journal(path, SimClock()).append("wf-demo", "begin", workflow="serve", target="lane")
    Journal(path, SystemClock()).append("wf-shell", "begin", workflow="stop", target="lane")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["clock"] == SIMULATED and "clock" not in lines[1]  # the wall: as before
    demo, shell = Journal(path).entries()
    assert (demo.clock, shell.clock) == (SIMULATED, "")
    assert Entry.from_json(demo.to_json()) == demo


def test_an_entry_on_an_unknown_clock_is_no_entry(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps({"t": 1.0, "wf": "w", "kind": "begin", "clock": "mars"}) + "\n")
    journal = Journal(path)
    assert journal.entries() == []
    assert journal.skipped and "clock" in journal.skipped[0], journal.skipped


def test_a_bundle_puts_each_entry_on_its_own_clocks_timeline() -> None:
    demo = Entry(t=1.0, wf="a", kind="begin", clock=SIMULATED)
    shell = Entry(t=2.0, wf="b", kind="begin")
    beside_a_sim = journal_stamp(SystemClock(), Clocks("wall clock (UTC)", shared=False))
    assert (beside_a_sim(shell), beside_a_sim(demo)) == (OURS, NODES)  # the sim's is the nodes'
    production = journal_stamp(SystemClock(), Clocks("wall clock (UTC)", shared=True))
    assert (production(shell), production(demo)) == (OURS, None)
    in_the_demo = journal_stamp(SimClock(), Clocks("the simulator's clock", shared=True))
    assert (in_the_demo(demo), in_the_demo(shell)) == (OURS, None)  # a shell's: no timeline
