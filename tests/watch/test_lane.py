"""The lane watcher's truth rules against the in-memory docker and a real
HTTP engine on loopback: whose server answered, bounded readiness, the
earliest fatal rank across lagging streams, the root cause."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_readiness import (
    FakeEngine,
    FakeNode,
    FastClock,
    P,
    engine,
    two_node_lane,
    until,
)

from sparktui.core.errors import RemoteError
from sparktui.core.logsig import Kind, Phase
from sparktui.watch.lane import (
    FatalDecided,
    LaneEvent,
    LaneWatcher,
    MemoryRead,
)
from sparktui.watch.lane_reads import (
    engine_read_bytes,
    io_command,
    read_bytes,
    resource_command,
    resource_parts,
)
from sparktui.watch.readiness import Outcome, served_models

__all__ = ["engine"]


def watcher(nodes: dict[str, FakeNode], ranks: list, stall: float = 7200,
            clock: FastClock | None = None, **kw: object) -> LaneWatcher:
    """A watcher on the scripted nodes. The stall window is long unless a test
    is about it: 7.2 real seconds at FastClock's 1000x (900 s was 0.9 s, which
    a loaded host spent on a port check's HTTP round trips: "stalled" instead
    of the verdict the test waits for)."""
    return LaneWatcher("m", ranks, nodes, "127.0.0.1", stall_after_s=stall,  # type: ignore[arg-type]
                       clock=clock or FastClock(), poll_s=1.0, first_token=False, **kw)


async def api_up(node: FakeNode, container: str = "sparktui-m-r0") -> None:
    await node.log(container, P + "Starting vLLM server on http://0.0.0.0:8000")
    await node.log(container, "INFO:     Application startup complete.")


async def test_a_stale_server_on_the_port_is_never_taken_for_the_boot(engine: FakeEngine
                                                                      ) -> None:
    nodes, ranks = await two_node_lane(engine)
    engine.node = None  # an old server: its access log is not this lane's log
    engine.health_status, engine.models = 200, ["m"]
    await engine.start()
    watch = watcher(nodes, ranks)
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...")
    await asyncio.sleep(0.3)
    assert not task.done() and not watch.stages  # no readiness before this lane's API phase
    nodes["dgx2"].ps.append({"Names": "sparktui-old-r0", "Image": "vllm", "State": "running",
                             "Status": "Up 2 hours", "Labels": "sparktui.lane=old,"
                             f"sparktui.rank=0,sparktui.port={engine.port}"})
    nodes["dgx1"].ps.append(nodes["dgx2"].ps[-1])
    await api_up(nodes["dgx1"])
    result = await asyncio.wait_for(task, 10)
    assert result.outcome is Outcome.FAILED, result.summary
    f = result.failure
    assert f is not None and f.kind is Kind.PORT_TAKEN
    assert f"port {engine.port} answered by lane old" in f.line
    assert "ready" not in result.summary


async def test_a_server_listing_another_model_fails_with_its_lane(engine: FakeEngine) -> None:
    nodes, ranks = await two_node_lane(engine)
    engine.health_status, engine.models = 200, ["other/model"]
    await engine.start()
    nodes["dgx1"].ps.append({"Names": "sparktui-x-r0", "Image": "vllm", "State": "running",
                             "Status": "Up 1 hour", "Labels": "sparktui.lane=x,"
                             f"sparktui.rank=0,sparktui.port={engine.port}"})
    watch = watcher(nodes, ranks)
    task = asyncio.create_task(watch.run())
    await api_up(nodes["dgx1"])
    result = await asyncio.wait_for(task, 10)
    assert result.outcome is Outcome.FAILED
    assert result.failure is not None
    assert result.failure.line == (f"port {engine.port} answered by lane x (/v1/models lists "
                                   "other/model, not m)")


async def test_the_lanes_own_server_is_ready_by_its_access_log_echo(engine: FakeEngine
                                                                    ) -> None:
    nodes, ranks = await two_node_lane(engine)
    engine.health_status, engine.models = 200, ["m"]
    await engine.start()
    watch = watcher(nodes, ranks)
    task = asyncio.create_task(watch.run())
    await api_up(nodes["dgx1"])
    result = await asyncio.wait_for(task, 10)
    assert result.outcome is Outcome.READY, result.summary
    assert any("GET /v1/models?sparktui=" in line for line in nodes["dgx1"].logs["sparktui-m-r0"])


async def test_startup_complete_but_endpoint_silent_stalls_at_the_window(engine: FakeEngine
                                                                         ) -> None:
    nodes, ranks = await two_node_lane(engine)
    clock = FastClock(speed=2000)
    watch = watcher(nodes, ranks, stall=300, clock=clock)
    task = asyncio.create_task(watch.run())
    await api_up(nodes["dgx1"])
    await until(lambda: Phase.SERVING in watch.tracker.phase_times)
    result = await asyncio.wait_for(task, 10)
    assert result.outcome is Outcome.STALLED, result.summary
    serving = result.phase_times[Phase.SERVING]
    assert result.phase_times[Phase.STALLED] - serving >= 300 - 10
    assert result.ranks == {0: "running", 1: "running"}
    assert result.ranks_text() == "still running: r0, r1"


async def test_the_earliest_fatal_rank_wins_over_a_lagging_stream(engine: FakeEngine) -> None:
    """Rank 1 fails 0.4 s before rank 0 by the nodes' clocks, but its stream
    starts later: the old 50 ms grace named rank 0."""
    for run in range(5):
        nodes, ranks = await two_node_lane(engine)
        nodes["dgx2"].stream_delay_s = 0.4
        watch = watcher(nodes, ranks)
        task = asyncio.create_task(watch.run())
        await nodes["dgx2"].log("sparktui-m-r1", "huggingface_hub.errors.LocalEntryNotFoundError:"
                                " Cannot find an appropriate cached snapshot folder", at=10)
        await nodes["dgx1"].log("sparktui-m-r0", P.replace("INFO", "ERROR") +
                                "Worker proc VllmWorker-1 died unexpectedly (exit code: 1), "
                                "shutting down executor.", at=11)
        result = await asyncio.wait_for(task, 10)
        f = result.failure
        assert f is not None and f.rank == 1 and f.kind is Kind.HF_ENTRY_MISSING, (run, f)


async def test_the_failure_keeps_the_root_cause_line_after_the_traceback(
        engine: FakeEngine) -> None:
    nodes, ranks = await two_node_lane(engine)
    events: list[LaneEvent] = []
    watch = watcher(nodes, ranks)
    watch.subscribe(events.append)
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P.replace("INFO", "ERROR") +
                            "EngineCore encountered a fatal error.")
    for line in ("Traceback (most recent call last):",
                 '  File "/x/multiproc_executor.py", line 312, in get_response',
                 '    raise TimeoutError(f"RPC call to {method} timed out.") from e',
                 "TimeoutError: RPC call to sample_tokens timed out."):
        await nodes["dgx1"].log("sparktui-m-r0", line)
    result = await asyncio.wait_for(task, 10)
    f = result.failure
    assert f is not None and f.rank == 0 and f.kind is Kind.ENGINE_DEAD
    assert f.cause == "TimeoutError: RPC call to sample_tokens timed out."
    assert next(e for e in events if isinstance(e, FatalDecided)).failure == f


async def test_a_silent_sparse_scan_is_progress_not_a_stall(engine: FakeEngine) -> None:
    """The seeds' I5 risk: a 101.5 GB shard read for an hour without a log
    line and with MemAvailable flat (page cache): the bytes read are progress."""
    nodes, ranks = await two_node_lane(engine)
    clock = FastClock(speed=500)  # slow enough for a loaded host: the window is 0.6 s
    watch = watcher(nodes, ranks, stall=300, clock=clock, resource_poll_s=20.0)
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...")
    for _ in range(15):  # 15 x 60 s = 900 s > stall window; 28 MB/s read, nothing printed
        await asyncio.sleep(60 / clock.speed)
        nodes["dgx2"].read_sectors += 28 * 60 * 2048
        assert not task.done(), task.result().summary
    result = await asyncio.wait_for(task, 5)  # reads stop: stalled after the window
    assert result.outcome is Outcome.STALLED
    assert "more read from disk/NFS" in result.last_progress


async def test_the_reader_shells_open_as_the_watch_starts(engine: FakeEngine) -> None:
    """Each rank node's reader shell is opened before any fatal line, so the
    catch-up reads of a fatal decision pay no session setup."""
    nodes, ranks = await two_node_lane(engine)
    opened: list[str] = []
    for name, node in nodes.items():
        async def open_reader(name: str = name) -> None:
            opened.append(name)

        node.open_reader = open_reader  # type: ignore[attr-defined]
    watch = watcher(nodes, ranks, probe_endpoint=False)
    watch.start()
    try:
        await until(lambda: len(opened) == 2)
        assert sorted(opened) == ["dgx1", "dgx2"] and watch.tracker.failure is None
        watch.update_ranks(ranks)  # a newer snapshot of the same ranks: not opened again
        await asyncio.sleep(0.05)
        assert len(opened) == 2
    finally:
        await watch.stop()


async def test_a_stop_journaled_by_another_process_ends_the_lane_stopped(engine: FakeEngine
                                                                        ) -> None:
    """A live stop of this boot (ops/stop_intents.py decides which boot, by
    journal order) makes the fatal line read after it and the exits the stop's
    doing; no such stop leaves them the lane's failure."""
    for stopped, outcome in ((True, Outcome.STOPPED), (False, Outcome.FAILED)):
        nodes, ranks = await two_node_lane(engine)
        asked: list[list[str]] = []
        delivered = asyncio.Event()

        def stop_intent(containers: Sequence[str], stopped: bool = stopped,
                        asked: list[list[str]] = asked, delivered: asyncio.Event = delivered
                        ) -> bool:
            asked.append(list(containers))
            return stopped and delivered.is_set()

        watch = watcher(nodes, ranks, probe_endpoint=False, stop_intent=stop_intent)
        events: list[LaneEvent] = []
        watch.subscribe(events.append)
        task = asyncio.create_task(watch.run())
        await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...", at=0)
        await nodes["dgx2"].log("sparktui-m-r1", P + "Starting to load model m...", at=0)
        await until(lambda w=watch: w.delivered.get(1) == 1)  # type: ignore[misc]
        assert watch.stopping_since is None
        delivered.set()  # the stop is journaled now
        await nodes["dgx2"].log("sparktui-m-r1", "huggingface_hub.errors.LocalEntryNotFoundError"
                                ": Cannot find an appropriate cached snapshot folder", at=10)
        await nodes["dgx2"].exit("sparktui-m-r1", 143)
        await nodes["dgx1"].exit("sparktui-m-r0", 1)
        result = await asyncio.wait_for(task, 10)
        assert result.outcome is outcome, result.summary
        assert ["sparktui-m-r0", "sparktui-m-r1"] in asked
        assert any(isinstance(e, FatalDecided) for e in events) is (outcome is Outcome.FAILED)


async def test_a_boot_that_ended_is_over_when_its_names_run_again(engine: FakeEngine
                                                                 ) -> None:
    """Stopped and served again between two console polls, under the same
    container names: the old watch (its stop, its verdict) is not the new
    boot's (service/cluster.py replaces it)."""
    nodes, ranks = await two_node_lane(engine)
    watch = watcher(nodes, ranks, probe_endpoint=False)
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...", at=0)
    await until(lambda: watch.delivered.get(0) == 1)
    assert not watch.ended_before(ranks, 1e12)  # running: the same boot
    watch.stopping()
    await nodes["dgx2"].exit("sparktui-m-r1", 0)
    await nodes["dgx1"].exit("sparktui-m-r0", 0)
    assert (await asyncio.wait_for(task, 10)).outcome is Outcome.STOPPED
    assert watch.ended_at is not None
    assert watch.ended_before(ranks, watch.ended_at + 1)  # the ranks run again: a new boot
    assert not watch.ended_before(ranks, watch.ended_at)  # a snapshot from before the exit
    assert not watch.ended_before([replace(r, running=False) for r in ranks],
                                  watch.ended_at + 1)


def test_served_models_from_engine_argv() -> None:
    assert served_models(["vllm", "serve", "org/m", "--port", "8000"]) == ("org/m",)
    assert served_models(["vllm", "serve", "org/m", "--served-model-name", "a", "b",
                          "--port", "1"]) == ("a", "b")
    assert served_models(["python3", "-m", "sglang.launch_server", "--model-path", "org/s",
                          "--tp", "2"]) == ("org/s",)
    assert served_models(["sh"]) == ()


def test_read_bytes_sums_disks_and_nfs_server_reads() -> None:
    text = ("   8       0 sda 100 0 2048 10 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
            "   7       0 loop0 5 0 999999 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
            "device nas:/v mounted on /mnt/nas with fstype nfs4 statvers=1.1\n"
            "\tbytes:\t10 20 30 40 5000 60 7 8\n")
    assert read_bytes(text) == 2048 * 512 + 5000
    assert read_bytes("garbage") is None


async def test_the_consoles_watcher_counts_its_ranks_engine_reads(engine: FakeEngine) -> None:
    """The console's watcher (memory from the poller) reads the I/O itself:
    a silent sparse scan by rank 1's engine, node counters flat, is progress
    named after the rank; when the reads stop the window applies."""
    nodes, ranks = await two_node_lane(engine)
    for name, pid in (("sparktui-m-r0", 4100), ("sparktui-m-r1", 4200)):
        node = nodes["dgx1" if name.endswith("r0") else "dgx2"]
        node.states[name]["Pid"] = pid
        node.engine_reads[pid] = 0
    clock = FastClock(speed=500)
    watch = watcher(nodes, ranks, stall=300, clock=clock, resource_poll_s=None, io_poll_s=20.0)
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...")
    for _ in range(15):  # 15 x 60 s = 900 s > stall window; 28 MB/s read, nothing printed
        await asyncio.sleep(60 / clock.speed)
        nodes["dgx2"].engine_reads[4200] += 28 * 60 * 2**20
        assert not task.done(), task.result().summary
    result = await asyncio.wait_for(task, 5)
    assert result.outcome is Outcome.STALLED
    assert "rank 1 (dgx2):" in result.last_progress
    assert "more read by its engine" in result.last_progress
    assert not any("meminfo" in c for n in nodes.values() for c in n.commands)


def test_io_command_takes_only_process_ids() -> None:
    assert "/proc/12/cgroup" in io_command([12]) and "@@pid 12" in io_command([12])
    for bad in (0, -1, "1; rm -rf /"):
        with pytest.raises(ValueError):
            io_command([bad])  # type: ignore[list-item]


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_io_command_reads_a_real_process_tree(shell: str) -> None:
    """The command as a login shell runs it, on this machine's own /proc:
    this test's process is a rank engine's main process here."""
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    me = os.getpid()
    with open(__file__, "rb") as f:  # some bytes read by this process
        f.read()
    out = subprocess.run([shell, "-c", io_command([me])], capture_output=True, text=True,
                         timeout=30).stdout
    reads = engine_read_bytes(out)
    assert reads.get(me, 0) > 0, out[-500:]


def test_engine_read_bytes_sums_each_process_of_a_rank() -> None:
    text = ("@@pid 7\nrchar: 100\nwchar: 1\nread_bytes: 4096\n"
            "rchar: 9000\nread_bytes: 0\n@@pid 9\nrchar: 5\nread_bytes: 0\n@@pid x\n"
            "rchar: 1\nread_bytes: 1\n")
    assert engine_read_bytes(text) == {7: 4096 + 9000, 9: 5}


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_resource_command_reads_this_machine(shell: str) -> None:
    """Memory, this test's process as a rank engine and the node's read
    counters, in one command run by a real shell, parsed by section."""
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    me = os.getpid()
    with open(__file__, "rb") as f:
        f.read()
    out = subprocess.run([shell, "-c", resource_command(True, [me], True)], capture_output=True,
                         text=True, timeout=30).stdout
    parts = resource_parts(out)
    assert set(parts) == {"meminfo", "engines", "io"}, out[:500]
    assert "MemAvailable:" in parts["meminfo"] and "@@pid" not in parts["meminfo"]
    assert engine_read_bytes(parts["engines"]).get(me, 0) > 0
    assert read_bytes(parts["io"]) is not None or not os.path.exists("/proc/diskstats")
    assert set(resource_parts(subprocess.run(
        [shell, "-c", resource_command(False, [], True)], capture_output=True, text=True,
        timeout=30).stdout)) == {"io"}


async def test_a_boot_reads_each_node_once_a_period(engine: FakeEngine) -> None:
    """Memory and the engines' reads in one command per node per period; the
    node's own counters only until its engines answer; a read that failed
    (the node did not answer) does not stop the engine reads."""
    nodes, ranks = await two_node_lane(engine)
    for name, pid in (("sparktui-m-r0", 4100), ("sparktui-m-r1", 4200)):
        node = nodes["dgx1" if name.endswith("r0") else "dgx2"]
        node.states[name]["Pid"] = pid
        node.engine_reads[pid] = 0
    answered = nodes["dgx2"].run
    failed: list[str] = []

    async def once_unanswered(cmd: str, timeout: float) -> object:
        if cmd.startswith("echo @@") and not failed:
            failed.append(cmd)
            raise RemoteError("dgx2", cmd, "timed out")
        return await answered(cmd, timeout)

    nodes["dgx2"].run = once_unanswered  # type: ignore[method-assign]
    clock = FastClock(speed=500)
    watch = watcher(nodes, ranks, stall=3600, clock=clock, resource_poll_s=20.0)
    memory: list[str] = []
    watch.subscribe(lambda e: memory.append(e.node) if isinstance(e, MemoryRead) else None)
    task = asyncio.create_task(watch.run())
    try:
        await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...")
        await until(lambda: len([c for c in nodes["dgx2"].commands
                                 if c.startswith("echo @@")]) >= 3)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert failed
    for name, node in nodes.items():
        reads = [c for c in node.commands if c.startswith("echo @@")]
        assert reads and all("@@meminfo" in c and "@@engines" in c for c in reads), name
        assert "@@io" in reads[0] and not any("@@io" in c for c in reads[1:]), name
        assert memory.count(name) == len(reads)
        assert not any(c.startswith(("cat ", 'echo "@@pid')) for c in node.commands), name
