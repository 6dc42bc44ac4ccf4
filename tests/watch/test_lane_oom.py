"""A rank's exit 137 and its node's kernel journal, through the lane watcher
(watch/lane_oom.py) against an in-memory docker and journal: the kernel's
oom-killer report naming the container's cgroup makes the failure an OOM with
its evidence (and `sparktui wait` says so); another container's kill, or a
journal that does not answer, leaves a plain SIGKILL. Golden shapes: docker
inspect's array with ``Id`` and ``State`` (moby api/types/container, State.Pid 0
once exited, OOMKilled false for a host OOM; REFERENCE.md §6) and the kernel's
report in ``journalctl -o short-iso-precise`` (tests/fixtures/kernel_oom.py has
its sources)."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_readiness import FakeEngine, FakeNode, FastClock, P, engine, labels

from sparktui.cli.wait_cmd import describe
from sparktui.core.errors import RemoteError
from sparktui.core.logsig import Kind, parse_timestamp
from sparktui.core.oomkill import LOOKBACK_S
from sparktui.watch.lane import LaneWatcher
from sparktui.watch.lane_oom import kernel_journal_command
from sparktui.watch.readiness import Outcome, WaitResult, discover_lane

from ..fixtures.kernel_oom import CID, OTHER, report

__all__ = ["engine"]  # the fixture, from test_readiness

STARTED = "2026-11-29T01:00:00.123456789Z"
FINISHED = "2026-11-29T01:05:00.5Z"
KILLED_AT = datetime(2026, 11, 29, 1, 5, 0, 200000, tzinfo=UTC).timestamp()


class KernelNode(FakeNode):
    """A fake node whose docker inspect has the whole shape and whose journal
    answers ``journalctl -k --since @N`` with ``kernel`` lines from N on."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.kernel: list[str] = []
        self.ids: dict[str, str] = {}
        self.journal_down = False

    async def run(self, cmd: str, timeout: float) -> object:
        if cmd.startswith("journalctl"):
            self.commands.append(cmd)
            if self.journal_down:
                raise RemoteError(self.name, "journalctl", "Connection lost")
            since = float(cmd.split("--since @")[1].split()[0])
            out = "".join(ln + "\n" for ln in self.kernel
                          if (parse_timestamp(ln.split(" ", 1)[0]) or 0) >= since)
            return type("Result", (), {"stdout": out, "exit_status": 0})()
        if cmd.startswith("docker inspect ") and not cmd.startswith("docker inspect --format"):
            self.commands.append(cmd)
            name = cmd.split()[2]
            state = self.states[name]
            running = bool(state["Running"])
            return type("Result", (), {"stdout": json.dumps([{
                "Id": self.ids[name], "Name": f"/{name}",
                "State": {"Status": state["Status"], "Running": running, "Paused": False,
                          "Restarting": False, "OOMKilled": state["OOMKilled"], "Dead": False,
                          "Pid": 4242 if running else 0, "ExitCode": state["ExitCode"],
                          "Error": "", "StartedAt": STARTED,
                          "FinishedAt": "0001-01-01T00:00:00Z" if running else FINISHED},
                "Config": {"Cmd": ["vllm", "serve", "m"]}}]), "exit_status": 0})()
        return await super().run(cmd, timeout)


async def lane(engine: FakeEngine) -> tuple[dict[str, KernelNode], LaneWatcher]:
    nodes = {"dgx1": KernelNode("dgx1"), "dgx2": KernelNode("dgx2")}
    engine.node, engine.container = nodes["dgx1"], "sparktui-m-r0"
    nodes["dgx1"].add("sparktui-m-r0", labels("m", 0, 2, engine.port))
    nodes["dgx2"].add("sparktui-m-r1", labels("m", 1, 2, engine.port))
    nodes["dgx1"].ids["sparktui-m-r0"] = OTHER
    nodes["dgx2"].ids["sparktui-m-r1"] = CID
    ranks = await discover_lane(nodes, "m")  # type: ignore[arg-type]
    watch = LaneWatcher("m", ranks, nodes, "127.0.0.1", stall_after_s=7200,  # type: ignore[arg-type]
                        clock=FastClock(), poll_s=1.0, resource_poll_s=None, io_poll_s=None)
    return nodes, watch


async def rank1_killed(engine: FakeEngine, kernel: list[str], *,
                       journal_down: bool = False) -> tuple[WaitResult, KernelNode]:
    nodes, watch = await lane(engine)
    nodes["dgx2"].kernel = kernel
    nodes["dgx2"].journal_down = journal_down
    task = asyncio.create_task(watch.run())
    await nodes["dgx2"].log("sparktui-m-r1", P + "Starting to load model m...")
    await asyncio.sleep(0.01)
    await nodes["dgx2"].exit("sparktui-m-r1", 137)
    return await asyncio.wait_for(task, 5), nodes["dgx2"]


async def test_a_137_with_the_kernels_kill_of_its_cgroup_is_an_oom(engine: FakeEngine) -> None:
    result, node = await rank1_killed(
        engine, report(KILLED_AT - 3 * 3600, 999, f"/system.slice/docker-{CID}.scope")
        + report(KILLED_AT, 4243, f"/system.slice/docker-{CID}.scope"))
    assert result.outcome is Outcome.FAILED
    f = result.failure
    assert f is not None and f.rank == 1 and f.kind is Kind.KERNEL_OOM_KILL
    assert f.line == ("OOM: the kernel's OOM killer killed python3 (pid 4243), anon-rss 99.0 GiB "
                      "(host out of memory on dgx2); container killed (SIGKILL)")
    assert parse_timestamp(f.timestamp) == KILLED_AT  # the kill, before docker's FinishedAt
    # read once, from the container's start (the earlier report is an earlier boot's)
    start = parse_timestamp(STARTED)
    assert start is not None
    journal = [c for c in node.commands if c.startswith("journalctl")]
    assert journal == [kernel_journal_command(max(start, parse_timestamp(FINISHED) - LOOKBACK_S))]
    assert journal[0] == (f"journalctl -k -o short-iso-precise --no-pager --since "
                          f"@{int(start)} -n 5000 2>/dev/null")
    text = describe(result)
    assert text.startswith("m: failed on rank 1: OOM: the kernel's OOM killer killed python3 "
                           "(pid 4243), anon-rss 99.0 GiB (host out of memory on dgx2)"), text


async def test_another_containers_kill_leaves_a_sigkill(engine: FakeEngine) -> None:
    result, node = await rank1_killed(
        engine, report(KILLED_AT, 4243, f"/system.slice/docker-{OTHER}.scope"))
    f = result.failure
    assert f is not None and f.rank == 1 and f.kind is Kind.CONTAINER_EXIT
    assert f.line == "container killed (SIGKILL)" and "OOM" not in describe(result)
    assert [c for c in node.commands if c.startswith("journalctl")]  # it was asked


async def test_a_journal_that_does_not_answer_claims_nothing(engine: FakeEngine) -> None:
    result, _ = await rank1_killed(
        engine, report(KILLED_AT, 4243, f"/system.slice/docker-{CID}.scope"), journal_down=True)
    f = result.failure
    assert f is not None and f.kind is Kind.CONTAINER_EXIT and "OOM" not in f.line
    assert "rank 1 (dgx2): kernel journal: Connection lost" in result.unread
    assert "(not read: rank 1 (dgx2): kernel journal: Connection lost)" in describe(result)


async def test_a_clean_exit_is_not_looked_up(engine: FakeEngine) -> None:
    nodes, watch = await lane(engine)
    task = asyncio.create_task(watch.run())
    await nodes["dgx2"].log("sparktui-m-r1", P + "Starting to load model m...")
    await asyncio.sleep(0.01)
    await nodes["dgx2"].exit("sparktui-m-r1", 0)
    result = await asyncio.wait_for(task, 5)
    assert result.failure is not None and result.failure.line == "container exited with code 0"
    assert not [c for c in nodes["dgx2"].commands if c.startswith("journalctl")]


async def test_a_generic_death_line_gets_the_kernels_kill_as_its_cause(
        engine: FakeEngine) -> None:
    """vLLM's API server logs its engine core's death while its container still
    runs: the kernel killed the core (pid 4243, a child: not State.Pid 4242),
    found by the container's cgroup, is the line's cause and its next step."""
    nodes, watch = await lane(engine)
    killed = datetime(2026, 11, 29, 1, 0, 0, 500000, tzinfo=UTC).timestamp()
    nodes["dgx1"].kernel = report(killed, 4243, f"/system.slice/docker-{OTHER}.scope")
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...")
    await nodes["dgx1"].log("sparktui-m-r0", "ERROR 11-29 01:00:01 [core_client.py:564] Engine "
                            "core proc EngineCore_DP0 died unexpectedly, shutting down client.")
    result = await asyncio.wait_for(task, 5)
    f = result.failure
    assert f is not None and f.rank == 0 and "died unexpectedly" in f.line
    assert f.cause is not None and f.cause.startswith(
        "OOM: the kernel's OOM killer killed python3 (pid 4243), anon-rss 99.0 GiB (host out "
        "of memory on dgx1)") and "container" not in f.cause  # it had not exited yet
    assert f.why is Kind.KERNEL_OOM_KILL
    assert "    cause: OOM: the kernel's OOM killer killed python3" in describe(result)
