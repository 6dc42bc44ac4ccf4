"""The journal read as it grows (ops/journal_tail.py): the workflow events
told from it are the runner's own (every kind but a step's progress, which
is not journaled), for workflows begun after the reader came, whichever
process wrote them; a journal cut shorter tells nothing twice, a replaced
one is told anew; the stop intents read through the same tail."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from sparktui.core.config_load import load_config
from sparktui.ops.context import OpsContext
from sparktui.ops.events import StepProgressed, WorkflowEvent, WorkflowFinished
from sparktui.ops.guards import GuardReport, Override, Verdict
from sparktui.ops.journal import Journal
from sparktui.ops.journal_tail import JournalTail, JournalWorkflows
from sparktui.ops.stop_intents import StopIntents
from sparktui.ops.workflows.runner import WorkflowRun
from sparktui.ops.workflows.stop import stop_command
from sparktui.sim.clock import SimClock

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    """Stepped by hand between the steps."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def ctx(journal: Journal, emitted: list[WorkflowEvent]) -> OpsContext:
    async def nothing(*_: Any) -> Any:
        raise AssertionError("not used")

    return OpsContext(config=load_config(ROOT / "config.toml"), link=nothing,  # type: ignore[arg-type]
                      power=None, power_error="none", snapshot=nothing, alive=nothing,
                      api_host=lambda n: "127.0.0.1", journal=journal,
                      locks=None,  # type: ignore[arg-type]
                      clock=journal.clock, emit=emitted.append)


def comparable(ev: WorkflowEvent) -> WorkflowEvent:
    """The journal keeps times to the millisecond."""
    fields: dict[str, Any] = {"at": round(ev.at, 3)}
    if hasattr(ev, "seconds"):
        fields["seconds"] = round(ev.seconds, 1)
    return dataclasses.replace(ev, **fields)


async def ok_step() -> str:
    return "done"


async def failing_step() -> str:
    raise RuntimeError("plug unavailable")


async def run_workflows(journal: Journal, emitted: list[WorkflowEvent]) -> None:
    """Two workflows as the runner runs them: a refused-then-overridden guard,
    a step done and one failed; then one left owing a plug."""
    c = ctx(journal, emitted)
    async with WorkflowRun(c, "power-cycle", "dgx6") as run:
        run.guards(GuardReport((
            Verdict("online", "dgx6", True, "dgx6 online"),
            Verdict("host-key", "dgx6", True, "two nodes share a key", warning=True),
            Verdict("protected-node", "dgx6", False, "dgx6 is protected",
                    override=Override.NODE_BUSY, overridden=True))))
        await run.step("plug off", "dgx6", "switch.turn_off dgx6", ok_step)
        journal.clock.now += 7.25  # type: ignore[attr-defined]
        await run.step("wait dark", "dgx6", "ping dgx6", failing_step)
    async with WorkflowRun(c, "power-cycle", "dgx7") as run:
        run.owe("plug", "turn dgx7's plug back on")
        await run.step("plug off", "dgx7", "switch.turn_off dgx7", failing_step)


async def test_the_journal_tells_the_runners_events_whoever_ran_them(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    other = Journal(path, Clock(1_764_450_000.0))  # another process's
    other.append("old-1", "begin", workflow="stop", target="x")  # before the sentinel came
    told: list[WorkflowEvent] = []
    tail = JournalTail(path)
    tail.subscribe(JournalWorkflows(told.append), from_now=True)
    other.append("old-1", "end", workflow="stop", target="x", ok=False, message="old")
    emitted: list[WorkflowEvent] = []
    await run_workflows(other, emitted)
    tail.read()
    expected = [comparable(e) for e in emitted if not isinstance(e, StepProgressed)]
    assert [comparable(e) for e in told] == expected
    finished = [e for e in told if isinstance(e, WorkflowFinished)]
    assert [(e.target, e.ok) for e in finished] == [("dgx6", False), ("dgx7", False)]
    assert "UNFINISHED: turn dgx7's plug back on" in finished[1].message
    tail.read()
    assert len(told) == len(expected)  # nothing new: nothing told


def test_a_journal_cut_shorter_tells_nothing_twice_and_a_new_one_is_told(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path, SimClock(epoch=1_764_450_000.0))
    told: list[WorkflowEvent] = []
    tail = JournalTail(path)
    tail.subscribe(JournalWorkflows(told.append), from_now=True)
    journal.append("wf-1", "begin", workflow="stop", target="a")
    journal.append("wf-1", "intent", target="a", step="stop rank 0", action="docker stop a")
    tail.read()
    assert len(told) == 2
    with open(path, "r+b") as f:  # a failed append cut off (Journal.append's ftruncate)
        f.truncate(path.stat().st_size - 5)
    tail.read()
    journal.append("wf-1", "end", workflow="stop", target="a", ok=True, message="done")
    tail.read()
    assert len(told) == 2  # the re-read told nothing again (the line after the cut is lost)
    fresh = Journal(tmp_path / "new.jsonl", SimClock(epoch=1_764_460_000.0))
    fresh.append("wf-2", "begin", workflow="serve", target="b")
    fresh.append("wf-2", "end", workflow="serve", target="b", ok=False, message="boot failed")
    os.replace(fresh.path, path)  # another journal in its place
    tail.read()
    assert [type(e).__name__ for e in told[2:]] == ["WorkflowStarted", "WorkflowFinished"]


def test_the_stop_intents_and_the_workflows_share_one_reader(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path, SimClock(epoch=1_764_450_000.0))
    tail = JournalTail(path)
    stops = StopIntents(journal, tail)
    told: list[WorkflowEvent] = []
    tail.subscribe(JournalWorkflows(told.append), from_now=True)
    journal.append("stop-1", "begin", workflow="stop", target="m")
    journal.append("stop-1", "intent", workflow="stop", target="dgx5", step="stop rank 0",
                   action=stop_command("sparktui-m-r0"))
    tail.read()  # the sentinel's periodic read
    size = path.stat().st_size
    reads: list[int] = []
    real_open = open

    def counting_open(*args: Any, **kw: Any) -> Any:
        reads.append(1)
        return real_open(*args, **kw)

    import builtins
    builtins.open = counting_open  # type: ignore[assignment]
    try:
        assert stops(["sparktui-m-r0"])  # already read: no second read of the bytes
    finally:
        builtins.open = real_open
    assert not reads and path.stat().st_size == size
    assert [type(e).__name__ for e in told] == ["WorkflowStarted", "StepStarted"]
