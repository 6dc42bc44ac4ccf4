"""Watcher benchmarks (issue 5).

1. ingest: lines/s through the log follower (chunk splitting, decoding,
   timestamps) and the phase tracker (signature table) — target >= 100k/s;
2. fatal line -> verdict: from the moment a rank's fatal line is written to
   its log stream until ``LaneWatcher.run()`` returns failed; the verdict waits
   until every rank's log is read past the fatal line (the other ranks are
   caught up by a one-shot read) — target <= 100 ms after the last rank
   caught up;
3. thrash flag: from the poll whose probe is starved to the THRASH verdict.

Parts 1 and 2 use in-memory log streams (no network); ``--sim`` adds, over
real SSH against the simulator (the shipped fleet): ingest of a 200k-line
container log, a rank's LocalEntryNotFoundError -> LaneWatcher verdict, and Boot D
thrash onset -> THRASH flag with the poller at its defaults (2 s interval,
3 s probe timeout). Around each measured event the manual sim clock is
paced at real time, so the figures are real seconds. ``--openssh`` measures
fatal line -> verdict over a real OpenSSH sshd on loopback (4 ranks, the
project's docker stand-in, streams established and idle), with the time the
one-shot catch-up reads of the other ranks took (the verdict waits for them).

Usage: .venv/bin/python bench/bench_watch.py [--lines 500000] [--repeat 20] [--sim] [--openssh]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from sparktui.adapters.endpoints import Endpoints, resolve_endpoints, sim_endpoints_path
from sparktui.adapters.ssh import Fleet
from sparktui.core.clock import SystemClock
from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.core.logsig import SIGNATURES, LogEvent, classify, message_of
from sparktui.core.phases import PhaseTracker
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.core.state import MemInfo, NodeSnapshot, NodeState, ProbeResult, Psi, PsiLine
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.sim.cluster import Sim
from sparktui.sim.dialects import load as load_dialect
from sparktui.sim.docker import Container
from sparktui.sim.testing import running_sim
from sparktui.watch.follower import LogFollower
from sparktui.watch.lane import FEED_SLICE, LaneWatcher
from sparktui.watch.poller import Poller
from sparktui.watch.readiness import RankContainer, discover_lane
from sparktui.watch.thrash import ThrashDetector

ROOT = Path(__file__).resolve().parents[1]

P = "(EngineCore_DP0 pid=312) INFO 11-29 01:02:03 [gpu_model_runner.py:5089] "
A = "(APIServer pid=1) INFO 11-29 01:02:03 [loggers.py:236] "
TEMPLATES = [
    A + "Engine 000: Avg prompt throughput: {f} tokens/s, Avg generation throughput: {g} "
        "tokens/s, Running: {a} reqs, Waiting: {b} reqs, GPU KV cache usage: {p}%, Prefix cache "
        "hit rate: {q}%",
    'INFO:     127.0.0.1:{port} - "GET /health HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "\rLoading safetensors checkpoint shards: {pct}% Completed | {a}/141 [{m}:{s}<{m}:{s},"
    " {g}s/it]",
    P + "Using max model len {big}",
    "\x1b[1;36m(APIServer pid={a})\x1b[0;0m INFO 11-29 01:02:03 [a.py:1] some informational text",
    "[2026-11-29 01:02:03 TP0] Decode batch, #running-req: {a}, token usage: 0.{b}, gen "
    "throughput (token/s): {g}",
    P + "Available KV cache memory: {g} GiB",
]
"""The lines of a serving engine mid-boot, by kind; each line's numbers
change with its index (ports, rates, counts), as a real log's do."""


def mix_line(i: int) -> str:
    """Line ``i`` of the bench log: its template's numbers drawn from ``i``."""
    return TEMPLATES[i % len(TEMPLATES)].format(
        a=i % 97, b=i % 13, f=f"{i % 9973 / 10:.1f}", g=f"{i % 613 / 10:.1f}",
        p=f"{i % 1000 / 10:.1f}", q=f"{i % 997 / 10:.1f}", port=1024 + i % 64000,
        pct=f"{i % 100:3d}", m=f"{i % 60:02d}", s=f"{i * 7 % 60:02d}", big=1 << (10 + i % 8))


MIX = [mix_line(i) for i in range(len(TEMPLATES))]


def dialect_lines(name: str = "vllm-0.33") -> list[str]:
    """A serving engine's lines rendered from the dialect's own strings (the
    wheel's formats, sim/dialects/): the boot of the golden transcript once,
    then what a busy engine prints (its stats line, uvicorn's access lines)."""
    golden = ROOT / "tests" / "fixtures" / "dialects" / "transcripts" \
        / "vllm033-v2-single-reasoning"
    with open(golden / "rank0.log", encoding="utf-8", newline="") as f:
        boot = [line.partition(" ")[2] for line in f.read().split("\n") if line]
    d = load_dialect(name)
    busy = []
    for i in range(97):
        msg = d.msg("stats_prefix", 0) + ", ".join((
            d.msg("stats", i * 13.7, i % 41 + 0.5, i % 5, i % 3), d.msg("stats_kv", "GPU", i / 9),
            d.msg("stats_hit", i / 7)))
        busy += d.record(msg, when=1.8e9 + i, where=d.entry("stats_call").where,
                         proc="APIServer")
        busy += [f'INFO:     127.0.0.1:{40000 + i} - "GET /health HTTP/1.1" 200 OK',
                 f'INFO:     127.0.0.1:{41000 + i} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
                 f'INFO:     127.0.0.1:{42000 + i} - "GET /metrics HTTP/1.1" 200 OK']
    return boot + busy


def dialect_log_bytes(n: int, name: str = "vllm-0.33") -> bytes:
    lines = dialect_lines(name)
    out = []
    for i in range(n):
        s, ns = divmod(i, 1000)
        out.append(f"2026-11-29T01:{s // 60 % 60:02d}:{s % 60:02d}.{ns:06d}000Z "
                   f"{lines[i % len(lines)]}\n")
    return "".join(out).encode()


def log_bytes(n: int) -> bytes:
    out = []
    for i in range(n):
        s, ns = divmod(i, 1000)
        out.append(f"2026-11-29T01:{s // 60 % 60:02d}:{s % 60:02d}.{ns:06d}000Z "
                   f"{mix_line(i)}\n")
    return "".join(out).encode()


class Chunks:
    """A finished container log served in 64 KiB chunks (what asyncssh hands over)."""

    def __init__(self, data: bytes, chunk: int = 65536) -> None:
        self.data, self.chunk = data, chunk

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        for i in range(0, len(self.data), self.chunk):
            yield self.data[i:i + self.chunk]


async def _ingest_once(data: bytes) -> tuple[float, float]:
    """Lines/s through the follower and the tracker: (wall, CPU time). Fed
    as ``LaneWatcher._ingest`` feeds a batch of a lane not being stopped:
    ``FEED_SLICE`` lines at a time, a yield to the loop after each full slice,
    every line's event kept."""
    follower = LogFollower.for_container(Chunks(data), "c", follow=False)
    tracker = PhaseTracker("bench", stall_after_s=900, start=0.0)
    t0, c0 = time.perf_counter(), time.process_time()
    count = 0
    async for batch in follower.batches():
        now = time.perf_counter()
        events: list[LogEvent | None] = []
        for at in range(0, len(batch), FEED_SLICE):
            part = batch[at:at + FEED_SLICE]
            events += tracker.feed_lines(0, part, now)
            if len(part) == FEED_SLICE:
                await asyncio.sleep(0)
        count += len(events)
    return count / (time.perf_counter() - t0), count / (time.process_time() - c0)


@contextmanager
def console_collector() -> Iterator[None]:
    """The collector as the console runs it (tui/app.quiet_collector: the
    heap frozen, young passes rarer), restored after."""
    from sparktui.tui.app import quiet_collector

    before = gc.get_threshold()
    gc.collect()
    quiet_collector()
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


async def _follow_once(data: bytes) -> tuple[float, float]:
    """The reference: the follower alone (splitting, decoding, timestamps)."""
    follower = LogFollower.for_container(Chunks(data), "c", follow=False)
    t0, c0 = time.perf_counter(), time.process_time()
    count = 0
    async for batch in follower.batches():
        count += len(batch)
    return count / (time.perf_counter() - t0), count / (time.process_time() - c0)


def _table_walk(line: str) -> object:
    """classify() without its prefilter: every signature in table order (the
    exactness reference of tests/core/test_logsig_prefilter.py)."""
    msg = message_of(line)
    for sig in SIGNATURES:
        if sig.pattern.search(msg) is not None:
            return sig
    return None


def _rate(fn: object, lines: list[str]) -> float:
    t0 = time.perf_counter()
    for line in lines:
        fn(line)  # type: ignore[operator]
    return len(lines) / (time.perf_counter() - t0)


def _word(i: int) -> str:
    """``i`` in letters (a digit would be masked: every line its own key)."""
    out = ""
    while True:
        i, r = divmod(i, 26)
        out += chr(97 + r)
        if not i:
            return out


async def bench_ingest_dialect(n: int, runs: int = 5) -> dict[str, float]:
    """Follower + tracker over vLLM 0.33 output rendered from the wheel's strings,
    beside the notes-built mix above, interleaved run by run (CPU best of runs)."""
    mix, dialect = log_bytes(n), dialect_log_bytes(n)
    mix_rates, dialect_rates = [], []
    for _ in range(runs):
        mix_rates.append(await _ingest_once(mix))
        dialect_rates.append(await _ingest_once(dialect))
    best_mix = max(r[1] for r in mix_rates)
    best = max(r[1] for r in dialect_rates)
    return {"lines": n, "runs": runs,
            "vllm033_follower_and_tracker_lines_per_s_median": statistics.median(
                r[0] for r in dialect_rates),
            "vllm033_follower_and_tracker_cpu_lines_per_s_best": best,
            "notes_mix_follower_and_tracker_cpu_lines_per_s_best": best_mix,
            "vllm033_to_notes_mix_cpu_ratio": best / best_mix,
            "vllm033_classify_only_lines_per_s": _rate(
                classify, dialect.decode().split("\n")[:100_000])}


async def bench_ingest(n: int, runs: int = 5) -> dict[str, float]:
    """Side by side, interleaved run by run: ingest with Python's default
    collector, ingest with the console's, and the follower alone. CPU time
    as well as wall: on a shared host the CPU figures (best of the runs) and
    their ratio are the ones to compare across runs. Beside them, classify
    alone over the same lines, and over lines that are each of a new shape
    (no route remembered: the memo's worst case)."""
    data = log_bytes(n)
    rates, console_rates, follower_rates = [], [], []
    for _ in range(runs):
        rates.append(await _ingest_once(data))
        with console_collector():
            console_rates.append(await _ingest_once(data))
        follower_rates.append(await _follow_once(data))
    lines = data.decode().split("\n")[:100_000]
    distinct = [f"{P}worker {_word(i)} reports {_word(i * 7919)} ready" for i in range(100_000)]
    cpu = max(r[1] for r in rates)
    console_cpu = max(r[1] for r in console_rates)
    follower_cpu = max(r[1] for r in follower_rates)
    return {"lines": n, "runs": runs,
            "follower_and_tracker_lines_per_s_median": statistics.median(r[0] for r in rates),
            "follower_and_tracker_console_gc_lines_per_s_median": statistics.median(
                r[0] for r in console_rates),
            "follower_alone_lines_per_s_median": statistics.median(
                r[0] for r in follower_rates),
            "follower_and_tracker_cpu_lines_per_s_best": cpu,
            "follower_and_tracker_console_gc_cpu_lines_per_s_best": console_cpu,
            "follower_alone_cpu_lines_per_s_best": follower_cpu,
            "ingest_to_follower_cpu_ratio": cpu / follower_cpu,
            "classify_only_lines_per_s": _rate(classify, lines),
            "classify_distinct_shapes_lines_per_s": _rate(classify, distinct),
            "classify_without_prefilter_lines_per_s": _rate(_table_walk, lines)}


class OneNode:
    """A node whose single container log gets lines pushed by the bench."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        while True:
            yield await self.queue.get()

    async def run(self, cmd: str, timeout: float) -> object:
        out = "MemTotal: 127600748 kB\nMemAvailable: 60000000 kB\n"
        if cmd.startswith("docker logs"):  # a catch-up read: nothing beyond the stream
            out = ""
        elif "meminfo" not in cmd:
            out = "{}"
        return type("R", (), {"stdout": out, "exit_status": 0})()


async def bench_fatal_exit(repeat: int) -> dict[str, float]:
    samples = []
    for i in range(repeat):
        nodes = {f"n{r}": OneNode() for r in range(8)}
        ranks = [RankContainer(r, f"n{r}", f"sparktui-m-r{r}", 8, None, "vllm", True)
                 for r in range(8)]
        watch = LaneWatcher("m", ranks, nodes, "127.0.0.1", stall_after_s=900,  # type: ignore[arg-type]
                            clock=SystemClock())
        task = asyncio.create_task(watch.run())
        for node in nodes.values():
            node.queue.put_nowait(f"2026-11-29T01:00:00.000000001Z {P}Starting to load model m"
                                  f"...\n".encode())
        await asyncio.sleep(0.01)
        victim = nodes[f"n{5 + i % 3}"]
        t0 = time.perf_counter()
        victim.queue.put_nowait(b"2026-11-29T01:00:01.000000001Z huggingface_hub.errors."
                                b"LocalEntryNotFoundError: Cannot find an appropriate cached "
                                b"snapshot folder\n")
        result = await task
        samples.append(time.perf_counter() - t0)
        assert result.failure is not None and result.failure.rank >= 5
    return {"repeat": repeat, "p50_ms": statistics.median(samples) * 1e3,
            "max_ms": max(samples) * 1e3}


def bench_thrash_verdict(repeat: int) -> dict[str, float]:
    """Time from the starved snapshot to the THRASH verdict (the rest of the
    detection latency is the poll interval plus the probe timeout)."""
    samples = []
    for _ in range(repeat):
        det = ThrashDetector()
        t = time.time()
        probe = ProbeResult(meminfo=MemInfo(127_600_748, 400_000),
                            psi=Psi(PsiLine(40, 30, 10, 9), PsiLine(25, 10, 5, 9)))
        det.on_snapshot(NodeSnapshot("dgx1", NodeState.ONLINE, t - 2, probe=probe,
                                     liveness=True))
        t0 = time.perf_counter()
        v = det.on_snapshot(NodeSnapshot("dgx1", NodeState.STARVED, t, liveness=True,
                                         stalled=True))
        samples.append(time.perf_counter() - t0)
        assert v.level is ThrashLevel.THRASH
    return {"repeat": repeat, "verdict_p50_us": statistics.median(samples) * 1e6}


# ---- over real SSH against the simulator -----------------------------------

@asynccontextmanager
async def sim_world(scenario: str) -> AsyncIterator[tuple[Sim, Config, Endpoints, Fleet]]:
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        config = load_config(ROOT / "config.toml")
        config = dataclasses.replace(
            config, console=dataclasses.replace(config.console, state_dir=f"{tmp}/state"))
        async with running_sim(config, scenario=scenario, workdir=Path(tmp) / "sim") as sim:
            path = sim_endpoints_path(config)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(sim.endpoints()))
            endpoints = resolve_endpoints(config)
            async with Fleet.from_config(config, endpoints, clock=sim.clock) as fleet:
                yield sim, config, endpoints, fleet


async def serve(config: Config, fleet: Fleet, recipe_name: str) -> str:
    recipe = load_recipe(config, recipe_name)
    launch = plan(config, recipe, recipe.cluster)
    for r in launch.ranks:
        await fleet.get(r.node).run(r.command(3), 30)
    return launch.lane


async def paced(sim: Sim, tick: float) -> None:
    """Let ``tick`` seconds of sim time pass in about as much real time."""
    await sim.advance(tick)
    await asyncio.sleep(tick)


async def bench_sim_ingest(lines: int) -> dict[str, float]:
    async with sim_world("normal") as (sim, config, _, fleet):
        lane = await serve(config, fleet, "dsv41-flash-8x")
        await sim.advance(60)
        container = sim.nodes["dgx1"].docker.containers[f"sparktui-{lane}-r0"]
        t = sim.wall()
        for i in range(lines):
            container.log(t + i * 1e-4, mix_line(i))
        follower = LogFollower.for_container(fleet.get("dgx1"), container.name, follow=False)
        tracker = PhaseTracker(lane, stall_after_s=900, start=0.0)
        count = 0
        t0 = time.perf_counter()
        async for batch in follower.batches():
            now = time.perf_counter()
            for line in batch:
                tracker.feed(0, line.text, now, line.ts)
            count += len(batch)
        dt = time.perf_counter() - t0
    return {"lines": count, "ssh_follower_and_tracker_lines_per_s": count / dt}


async def bench_sim_fatal_exit(repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        async with sim_world("cache-not-symlink") as (sim, config, endpoints, fleet):
            lane = await serve(config, fleet, "dsv41-flash-8x")
            links = {n: fleet.get(n) for n in config.nodes}
            ranks = await discover_lane(links, lane)  # type: ignore[arg-type]
            watch = LaneWatcher(lane, ranks, links, endpoints.node("dgx1").api_host,  # type: ignore[arg-type]
                                stall_after_s=900, clock=sim.clock)
            task = asyncio.create_task(watch.run())
            written: list[float] = []
            for r, n in ((5, "dgx6"), (6, "dgx7"), (7, "dgx8")):
                _stamp_fatal(sim.nodes[n].docker.containers[f"sparktui-{lane}-r{r}"], written)
            while not task.done():
                await paced(sim, 0.001)
            samples.append(time.perf_counter() - min(written))
            assert task.result().failure is not None
    return {"repeat": repeat, "p50_ms": statistics.median(samples) * 1e3,
            "max_ms": max(samples) * 1e3}


def _stamp_fatal(container: Container, written: list[float]) -> None:
    """Record when the simulated engine writes its fatal line (bench only)."""
    log = container.log

    def stamped(t: float, text: str, stream: str = "stdout") -> None:
        if "LocalEntryNotFoundError" in text:
            written.append(time.perf_counter())
        log(t, text, stream)

    container.log = stamped  # type: ignore[method-assign]


async def _judge(detector: ThrashDetector, queue: asyncio.Queue[NodeSnapshot]) -> None:
    """What service.cluster does with the poller's snapshots."""
    while True:
        detector.on_snapshot(await queue.get())


async def bench_sim_thrash(repeat: int) -> dict[str, object]:
    samples: list[float] = []
    for _ in range(repeat):
        async with sim_world("boot-d-oom") as (sim, config, endpoints, fleet):
            nodes = config.clusters["4nodes-switch"].nodes
            flagged: dict[str, float] = {}

            def on_change(v: ThrashVerdict, flagged: dict[str, float] = flagged) -> None:
                if v.level is ThrashLevel.THRASH:
                    flagged.setdefault(v.node, time.perf_counter())

            detector = ThrashDetector(config.thrash, clock=sim.clock, on_change=on_change)
            poller = Poller(config, fleet, endpoints, nodes=nodes, clock=sim.clock)
            queue = poller.subscribe()
            poller.start()
            task = asyncio.create_task(_judge(detector, queue))
            try:
                await serve(config, fleet, "dsv41-flash-r37-4x-eager")
                while not any(sim.nodes[n].thrashing for n in nodes):
                    await sim.advance(1.0)
                    await asyncio.sleep(0.003)
                onset = {n: time.perf_counter() for n in nodes if sim.nodes[n].thrashing}
                deadline = time.perf_counter() + 30
                while set(flagged) < set(onset) and time.perf_counter() < deadline:
                    await paced(sim, 0.01)
                samples += [flagged[n] - onset[n] for n in onset if n in flagged]
                assert set(onset) <= set(flagged), (onset, flagged)
            finally:
                await poller.stop()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    return {"repeat": repeat, "nodes_measured": len(samples),
            "p50_s": statistics.median(samples), "max_s": max(samples),
            "budget_s": config.console.poll_interval_s + config.console.probe_timeout_s}


def host_line() -> str:
    return (f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
            f"{os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


async def bench_openssh_fatal(repeat: int, ranks_n: int = 4, *, shells: bool = True
                             ) -> dict[str, object]:
    """``shells`` False: each catch-up read on an exec channel of its own (as
    before the reader shell), for the side-by-side figure. Beside the total,
    where the time goes (medians over the runs): fatal line written -> its
    line received over the stream -> first catch-up read issued -> last one
    answered -> verdict."""
    import sys
    import time as _time

    sys.path.insert(0, str(ROOT / "tests"))
    from adapters.docker_standin import install
    from adapters.openssh_server import openssh_server
    from sparktui.adapters.endpoints import NodeEndpoint
    from sparktui.adapters.ssh import NodeConnection
    from sparktui.core.config import SshConfig
    from sparktui.watch.lane import FatalDecided, LaneEvent, LinesArrived

    def ts() -> str:
        from datetime import UTC, datetime
        return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")

    total: list[float] = []
    stages: dict[str, list[float]] = {"written_to_received": [], "received_to_first_read": [],
                                      "first_read_to_last_answer": [],
                                      "last_answer_to_verdict": []}
    reads: list[float] = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        bin_dir = tmp / "bin"
        install(str(bin_dir))
        state = bin_dir / "state"
        with openssh_server(tmp, f"SetEnv PATH={bin_dir}:/usr/bin:/bin\n") as server:
            def endpoint(name: str) -> NodeEndpoint:
                return NodeEndpoint(name, "127.0.0.1", server.port, server.user,
                                    str(server.known_hosts), (str(server.client_key),), (),
                                    "tcp", "127.0.0.1", None, "127.0.0.1")

            ssh = SshConfig(connect_timeout_s=5.0, keepalive_interval_s=5.0)
            links = {f"n{r}": NodeConnection(endpoint(f"n{r}"), ssh) for r in range(ranks_n)}
            spans: list[tuple[float, float]] = []

            class Timed:
                """A link whose docker-logs one-shot reads are timed."""

                def __init__(self, link: NodeConnection) -> None:
                    self.link = link

                def stream(self, cmd: str) -> AsyncIterator[bytes]:
                    return self.link.stream(cmd)

                async def run(self, cmd: str, timeout: float) -> object:
                    return await self.link.run(cmd, timeout)

                async def open_reader(self) -> None:
                    if shells:
                        await self.link.open_reader()

                async def read(self, cmd: str, timeout: float) -> object:
                    t0 = _time.perf_counter()
                    try:
                        if shells:
                            return await self.link.read(cmd, timeout)
                        return await self.link.run(cmd, timeout)  # a channel per read
                    finally:
                        spans.append((t0, _time.perf_counter()))

            try:
                for i in range(repeat):
                    lane = f"b{i}"
                    victim = 1 + i % (ranks_n - 1)
                    for r in range(ranks_n):
                        (state / f"{lane}-r{r}.json").write_text(json.dumps({
                            "Running": True, "ExitCode": 0, "OOMKilled": False,
                            "StartedAt": ts(), "FinishedAt": "0001-01-01T00:00:00Z",
                            "Labels": {"sparktui.lane": lane}, "Cmd": ["vllm", "serve", "m"]}))
                        (state / f"{lane}-r{r}.log").write_text(
                            f"{ts()} {P}Starting to load model m...\n")
                    ranks = [RankContainer(r, f"n{r}", f"{lane}-r{r}", ranks_n, None, "vllm",
                                           True) for r in range(ranks_n)]
                    watch = LaneWatcher(lane, ranks, {n: Timed(c) for n, c in links.items()},  # type: ignore[misc]
                                        "127.0.0.1", stall_after_s=900, clock=SystemClock(),
                                        resource_poll_s=None, io_poll_s=None,
                                        probe_endpoint=False)
                    decided: list[float] = []
                    received: list[float] = []

                    def on_event(event: LaneEvent, decided: list[float] = decided,
                                 received: list[float] = received, victim: int = victim) -> None:
                        if isinstance(event, FatalDecided):
                            decided.append(_time.perf_counter())
                        elif isinstance(event, LinesArrived) and event.rank == victim \
                                and any(e is not None and e.fatal for e in event.events):
                            received.append(_time.perf_counter())

                    watch.subscribe(on_event)
                    task = asyncio.create_task(watch.run())
                    while any(watch.delivered.get(r, 0) < 1 for r in range(ranks_n)):
                        await asyncio.sleep(0.01)  # every stream established and caught up
                    await asyncio.sleep(0.3)
                    spans.clear()
                    with (state / f"{lane}-r{victim}.log").open("a") as f:
                        f.write(f"{ts()} huggingface_hub.errors.LocalEntryNotFoundError: "
                                "Cannot find an appropriate cached snapshot folder\n")
                    t0 = _time.perf_counter()
                    await asyncio.wait_for(task, 30)
                    total.append(decided[0] - t0)
                    got = received[0] if received else t0
                    first = min((a for a, _ in spans), default=got)
                    last = max((b for _, b in spans), default=first)
                    stages["written_to_received"].append(got - t0)
                    stages["received_to_first_read"].append(first - got)
                    stages["first_read_to_last_answer"].append(last - first)
                    stages["last_answer_to_verdict"].append(decided[0] - last)
                    reads += [b - a for a, b in spans]
            finally:
                for c in links.values():
                    await c.close()
    return {"repeat": repeat, "ranks": ranks_n,
            "p50_ms": round(statistics.median(total) * 1e3, 1),
            "max_ms": round(max(total) * 1e3, 1),
            "stages_p50_ms": {k: round(statistics.median(v) * 1e3, 1) for k, v in stages.items()},
            "stages_max_ms": {k: round(max(v) * 1e3, 1) for k, v in stages.items()},
            "catch_up_read_p50_ms": round(statistics.median(reads) * 1e3, 1) if reads else None,
            "catch_up_reads_per_run": len(reads) / repeat}


def standin_start(repeat: int = 20) -> dict[str, float]:
    """What one catch-up read costs the stand-in by itself (no ssh): a
    ``docker logs --since`` of a short log, started as sshd would start it."""
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from adapters.docker_standin import install

    with tempfile.TemporaryDirectory() as tmp:
        docker = install(tmp)
        Path(tmp, "state", "c.json").write_text('{"Running": true}')
        Path(tmp, "state", "c.log").write_text("2026-11-29T01:00:00.000001Z a line\n")
        cmd = [docker, "logs", "--since", "2026-11-29T01:00:00Z", "--timestamps", "c"]
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
            samples.append(time.perf_counter() - t0)
    return {"repeat": repeat, "p50_ms": round(statistics.median(samples) * 1e3, 1),
            "min_ms": round(min(samples) * 1e3, 1)}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--sim", action="store_true", help="also measure over SSH against the sim")
    ap.add_argument("--dialect", action="store_true",
                    help="only ingest over vLLM 0.33 output rendered from the wheel's strings")
    ap.add_argument("--openssh", action="store_true",
                    help="only fatal line -> verdict over a real sshd on loopback")
    args = ap.parse_args()
    if args.dialect:
        print(json.dumps({"host": host_line(),
                          "ingest_vllm033": await bench_ingest_dialect(args.lines),
                          "host_after": host_line()}, indent=2))
        return
    if args.openssh:
        print(json.dumps({"host": host_line(),
                          "docker_standin_alone": standin_start(),
                          "openssh_fatal_line_to_verdict": {
                              "reads_in_the_reader_shell": await bench_openssh_fatal(args.repeat),
                              "a_channel_per_read": await bench_openssh_fatal(
                                  args.repeat, shells=False)},
                          "host_after": host_line()}, indent=2))
        return
    report: dict[str, object] = {
        "host": host_line(),
        "ingest": await bench_ingest(args.lines),
        "fatal_line_to_exit": await bench_fatal_exit(args.repeat),
        "thrash_verdict": bench_thrash_verdict(args.repeat),
    }
    if args.sim:
        report["sim_ingest"] = await bench_sim_ingest(200_000)
        report["sim_fatal_line_to_exit"] = await bench_sim_fatal_exit(5)
        report["sim_thrash_flag"] = await bench_sim_thrash(3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
