"""The shift log screen never shows a phase as "0s": a phase whose lines were
read in one batch has no measured duration, and says nothing rather than lie."""

from __future__ import annotations

from pathlib import Path

from sparktui.ops.journal import Journal
from sparktui.ops.shiftlog import render
from sparktui.sim.clock import SimClock


async def test_a_phase_read_in_one_batch_is_not_shown_as_0s(tmp_path: Path) -> None:
    clock = SimClock()  # manual
    j = Journal(tmp_path / "journal.jsonl", clock)
    j.append("s1", "begin", workflow="serve", target="lane", detail={"recipe": "lane",
                                                                     "cluster": "c"})
    await clock.advance(900)
    j.append("s1", "end", workflow="serve", target="lane", ok=True, message="serving",
             detail={"phases": {"starting": 0.0, "loading weights": 30.0,
                                "KV allocation": 700.0, "graph capture": 760.4,
                                "API starting": 760.4, "serving": 790.0}})
    text = render(j.entries(), since=0)
    assert "Phases: loading weights 11m10s, KV allocation 1m00s, API starting 30s." in text
    assert "graph capture" not in text and " 0s" not in text
