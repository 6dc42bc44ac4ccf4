"""The journal's stop intents as a lane watcher asks for them: any process's,
read incrementally, only the boot's own (not an earlier boot's stop of the
same container names: by journal order, never by comparing the journal's
clock with the containers'), not a stop whose process died before its end,
a line still being written read once complete."""

from __future__ import annotations

import shlex
from pathlib import Path

from sparktui.ops.journal import Journal
from sparktui.ops.stop_intents import StopIntents, started_container
from sparktui.ops.workflows.stop import stop_command
from sparktui.sim.clock import SimClock

DEAD_PID = 2 ** 22 + 12345
"""Above Linux's pid_max (4194304): no process has it."""


def intent(journal: Journal, container: str, wf: str = "stop-1") -> None:
    journal.append(wf, "intent", workflow="stop", target="dgx5", step="stop rank 1",
                   action=stop_command(container))


def start(journal: Journal, container: str, wf: str = "serve-1") -> None:
    action = shlex.join(["docker", "run", "-d", "--name", container, "img", "vllm", "serve"])
    journal.append(wf, "intent", workflow="serve", target="dgx5", step="start rank 1",
                   action=action)


def test_a_stop_journaled_by_another_writer_is_seen_from_its_intent(tmp_path: Path) -> None:
    cli = Journal(tmp_path / "journal.jsonl", SimClock(epoch=1000.0))  # the other process
    stops = StopIntents(Journal(tmp_path / "journal.jsonl"))
    assert not stops(["sparktui-m-r0", "sparktui-m-r1"])  # no journal yet
    start(cli, "sparktui-m-r1")
    assert not stops(["sparktui-m-r1"])
    intent(cli, "sparktui-m-r1")
    assert stops(["sparktui-m-r0", "sparktui-m-r1"]) and stops(["sparktui-m-r1"])
    assert not stops(["sparktui-m-r0"]) and not stops(["sparktui-other-r0"])


def test_an_earlier_boots_stop_of_the_same_names_does_not_count_whatever_the_clocks(
        tmp_path: Path) -> None:
    """The journal's clock far ahead of the containers' (a simulator started at
    an old epoch) made the old stop look newer than the new boot: journal order
    decides, not time."""
    cli = Journal(tmp_path / "journal.jsonl", SimClock(epoch=5_000_000.0))
    stops = StopIntents(cli)
    start(cli, "sparktui-m-r1")
    intent(cli, "sparktui-m-r1", wf="stop-1")
    assert stops(["sparktui-m-r1"])
    start(cli, "sparktui-m-r1", wf="serve-2")  # the same name served again
    assert not stops(["sparktui-m-r1"])
    intent(cli, "sparktui-m-r1", wf="stop-2")
    assert stops(["sparktui-m-r1"])


def test_a_stop_whose_process_died_before_its_end_stops_nothing(tmp_path: Path) -> None:
    cli = Journal(tmp_path / "journal.jsonl", SimClock(epoch=1000.0))
    stops = StopIntents(cli)
    start(cli, "sparktui-m-r0")
    cli.append("stop-dead", "begin", workflow="stop", target="m", detail={"pid": DEAD_PID})
    intent(cli, "sparktui-m-r0", wf="stop-dead")
    assert not stops(["sparktui-m-r0"])  # kill -9 mid-stop: the lane is not stopping
    cli.append("stop-dead", "end", workflow="stop", target="m", ok=False)
    assert stops(["sparktui-m-r0"])  # ...but a stop that ended did happen


def test_the_started_container_of_a_docker_run() -> None:
    assert started_container("docker run -d --name sparktui-m-r0 img") == "sparktui-m-r0"
    assert started_container("docker rm sparktui-m-r0") is None
    assert started_container("docker run -d --name") is None
    assert started_container("docker run 'unclosed") is None


def test_a_torn_line_is_read_once_complete_and_a_new_journal_anew(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    cli = Journal(path, SimClock(epoch=1000.0))
    stops = StopIntents(cli)
    intent(cli, "sparktui-m-r0")
    line = path.read_bytes()
    path.write_bytes(b"garbage that is no entry\n" + line[:30])  # a write in progress
    assert not stops(["sparktui-m-r0"])
    with path.open("ab") as f:
        f.write(line[30:])
    assert stops(["sparktui-m-r0"])
    path.unlink()
    assert not stops(["sparktui-m-r0"])
    Journal(path, SimClock(epoch=2000.0)).append("stop-2", "intent",
                                                 action=stop_command("sparktui-m-r0"))
    assert stops(["sparktui-m-r0"])
