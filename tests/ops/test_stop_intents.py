"""The journal's stop intents as a lane watcher asks for them: any process's,
read incrementally, only the boot's own (not an earlier boot's stop of the
same container names), a line still being written read once complete."""

from __future__ import annotations

from pathlib import Path

from sparktui.ops.journal import Journal
from sparktui.ops.stop_intents import StopIntents
from sparktui.ops.workflows.stop import stop_command
from sparktui.sim.clock import SimClock


def intent(journal: Journal, container: str, wf: str = "stop-1") -> None:
    journal.append(wf, "intent", workflow="stop", target="dgx5", step="stop rank 1",
                   action=stop_command(container))


async def test_a_stop_journaled_by_another_writer_is_seen_from_its_intent(tmp_path: Path
                                                                         ) -> None:
    clock = SimClock(epoch=1000.0)
    cli = Journal(tmp_path / "journal.jsonl", clock)  # the other process's writer
    stops = StopIntents(Journal(tmp_path / "journal.jsonl"))
    assert stops.since(["sparktui-m-r0", "sparktui-m-r1"], 0.0) is None  # no journal yet
    cli.append("serve-1", "intent", workflow="serve", target="dgx5", step="start rank 1",
               action="docker run ... sparktui-m-r1")
    assert stops.since(["sparktui-m-r1"], 0.0) is None
    intent(cli, "sparktui-m-r1")
    await clock.advance(10.0)
    intent(cli, "sparktui-m-r0")
    assert stops.since(["sparktui-m-r0", "sparktui-m-r1"], 0.0) == 1000.0
    assert stops.since(["sparktui-m-r0"], 0.0) == 1010.0
    assert stops.since(["sparktui-other-r0"], 0.0) is None


async def test_an_earlier_boots_stop_of_the_same_names_does_not_count(tmp_path: Path) -> None:
    clock = SimClock(epoch=1000.0)
    cli = Journal(tmp_path / "journal.jsonl", clock)
    intent(cli, "sparktui-m-r1")
    stops = StopIntents(cli)
    assert stops.since(["sparktui-m-r1"], after=1500.0) is None  # this boot began at 1500
    await clock.advance(600.0, step=600.0)
    intent(cli, "sparktui-m-r1")
    assert stops.since(["sparktui-m-r1"], after=1500.0) == 1600.0


def test_a_torn_line_is_read_once_complete_and_a_new_journal_anew(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    cli = Journal(path, SimClock(epoch=1000.0))
    stops = StopIntents(cli)
    intent(cli, "sparktui-m-r0")
    line = path.read_bytes()
    path.write_bytes(b"garbage that is no entry\n" + line[:30])  # a write in progress
    assert stops.since(["sparktui-m-r0"], 0.0) is None
    with path.open("ab") as f:
        f.write(line[30:])
    assert stops.since(["sparktui-m-r0"], 0.0) == 1000.0
    path.unlink()
    assert stops.since(["sparktui-m-r0"], 0.0) is None
    Journal(path, SimClock(epoch=2000.0)).append("stop-2", "intent",
                                                 action=stop_command("sparktui-m-r0"))
    assert stops.since(["sparktui-m-r0"], 0.0) == 2000.0
