"""Readiness by progress, against an in-memory docker (log streams) and a
real HTTP server on loopback playing the engine endpoint."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from sparktui.adapters.engine_http import EngineClient, parse_metrics, port_open
from sparktui.core.logsig import Kind, Phase
from sparktui.watch.lane import LaneWatcher
from sparktui.watch.readiness import (
    Outcome,
    RankContainer,
    discover_lane,
)

P = "(EngineCore_DP0 pid=312) INFO 11-29 01:02:03 [x.py:1] "


class FastClock:
    """Real time sped up: deterministic ordering, fast tests."""

    def __init__(self, speed: float = 1000.0) -> None:
        self.speed = speed
        self.t0 = time.monotonic()

    def time(self) -> float:
        return 1.8e9 + self.monotonic()

    def monotonic(self) -> float:
        return (time.monotonic() - self.t0) * self.speed

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds / self.speed)


def stamp(i: int) -> str:
    return f"2026-11-29T01:{i // 60 % 60:02d}:{i % 60:02d}.000000000Z"


class FakeNode:
    """One node: containers with scripted logs (lines released over time)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.logs: dict[str, list[str]] = {}
        self.states: dict[str, dict[str, object]] = {}
        self.ps: list[dict[str, str]] = []
        self.new_line = asyncio.Condition()
        self.mem_available_kib = 120 * 1024 * 1024
        self.read_sectors = 0
        """Sectors read from the node's disks (/proc/diskstats)."""
        self.stream_delay_s = 0.0
        """Real seconds before a stream delivers anything (a late channel)."""
        self.engine_reads: dict[int, int] = {}
        """Bytes read by each container's engine, by its main pid (/proc/<pid>/io)."""
        self.commands: list[str] = []

    def add(self, container: str, labels: dict[str, str]) -> None:
        self.logs[container] = []
        self.states[container] = {"Status": "running", "Running": True, "ExitCode": 0,
                                  "OOMKilled": False}
        self.ps.append({"Names": container, "Image": "vllm", "State": "running",
                        "Status": "Up 5 minutes",
                        "Labels": ",".join(f"{k}={v}" for k, v in labels.items())})

    async def log(self, container: str, text: str, at: int | None = None) -> None:
        async with self.new_line:
            n = len(self.logs[container]) if at is None else at
            self.logs[container].append(f"{stamp(n)} {text}\n")
            self.new_line.notify_all()

    async def exit(self, container: str, code: int) -> None:
        async with self.new_line:
            self.states[container].update(Status="exited", Running=False, ExitCode=code)
            self.new_line.notify_all()

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        container = cmd.split("--timestamps ")[1].split(" ")[0]
        pos = 0
        await asyncio.sleep(self.stream_delay_s)
        while True:
            async with self.new_line:
                while pos >= len(self.logs[container]) and self.states[container]["Running"]:
                    await self.new_line.wait()
                lines = self.logs[container][pos:]
                pos += len(lines)
                running = self.states[container]["Running"]
            if lines:
                yield "".join(lines).encode()
            elif not running:
                return

    async def run(self, cmd: str, timeout: float) -> object:
        self.commands.append(cmd)
        if cmd.startswith("docker ps"):
            out = "".join(json.dumps(c) + "\n" for c in self.ps)
        elif cmd.startswith("echo @@"):  # watch/lane_reads.resource_command
            out = ""
            if "@@meminfo" in cmd:
                out += (f"@@meminfo\nMemTotal:       127600748 kB\nMemFree:        1000 kB\n"
                        f"MemAvailable:   {self.mem_available_kib} kB\n")
            if "@@engines" in cmd:
                out += "@@engines\n" + "".join(
                    f"@@pid {pid}\nrchar: {n // 2}\nwchar: 0\nsyscr: 1\nsyscw: 0\n"
                    f"read_bytes: {n}\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"
                    for pid, n in self.engine_reads.items() if f"@@pid {pid}" in cmd)
            if "@@io" in cmd:
                out += (f"@@io\n 259       0 nvme0n1 900 0 {self.read_sectors} 10 0 0 0 0 0 0 0"
                        " 0 0 0 0 0 0\n")
        elif cmd.startswith("docker inspect --format"):
            name = cmd.split()[-2]
            out = json.dumps(self.states[name]) + "\n"
        elif cmd.startswith("docker inspect"):
            name = cmd.split()[2]
            out = json.dumps([{"State": {**self.states[name], "StartedAt":
                                         "2026-11-29T01:00:00Z"},
                               "Config": {"Cmd": ["vllm", "serve", "m"]}}])
        elif cmd.startswith("docker logs"):
            name = cmd.split("--timestamps ")[1].split(" ")[0]
            since = cmd.split("--since ")[1].split(" ")[0].strip("'") if "--since" in cmd \
                else ""
            out = "".join(ln for ln in self.logs[name] if ln.split(" ", 1)[0] >= since)
        else:
            out = ""
        return type("Result", (), {"stdout": out, "exit_status": 0})()


class FakeEngine:
    """The engine's HTTP face on 127.0.0.1: not listening until started."""

    def __init__(self) -> None:
        self.health_status = 503
        self.models: list[str] = []
        self.stream_chat = True
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.node: FakeNode | None = None
        self.container = ""
        """Whose log the access log lines go to (None: access log off)."""

    async def reserve_port(self) -> int:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        return self.port

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/v1/chat/completions", self._chat)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.health_status)

    async def _models(self, request: web.Request) -> web.Response:
        if self.node is not None:
            await self.node.log(self.container, f'INFO:     127.0.0.1:5 - "GET {request.path_qs} '
                                'HTTP/1.1" 200 OK')
        return web.json_response({"object": "list", "data": [
            {"id": m, "object": "model", "created": 1, "owned_by": "vllm", "root": m,
             "parent": None, "max_model_len": 131072, "permission": []} for m in self.models]})

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=(
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
            "# TYPE vllm:prompt_tokens counter\n"
            'vllm:prompt_tokens_total{engine="0",model_name="m"} 1234.0\n'))

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        assert body["stream"] is True and body["max_tokens"] == 1
        if not self.stream_chat:  # a server that ignores "stream"
            return web.json_response({"object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for delta in ({"role": "assistant", "content": ""}, {"content": "OK"}):
            chunk = {"choices": [{"index": 0, "delta": delta}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp


async def until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not reached"
        await asyncio.sleep(0.005)


def labels(lane: str, rank: int, nranks: int, port: int) -> dict[str, str]:
    return {"sparktui.lane": lane, "sparktui.cluster": "c", "sparktui.rank": str(rank),
            "sparktui.nranks": str(nranks), "sparktui.port": str(port),
            "sparktui.engine": "vllm"}


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    e = FakeEngine()
    await e.reserve_port()
    yield e
    await e.stop()


async def two_node_lane(engine: FakeEngine) -> tuple[dict[str, FakeNode], list[RankContainer]]:
    nodes = {"dgx1": FakeNode("dgx1"), "dgx2": FakeNode("dgx2")}
    engine.node, engine.container = nodes["dgx1"], "sparktui-m-r0"
    nodes["dgx1"].add("sparktui-m-r0", labels("m", 0, 2, engine.port))
    nodes["dgx2"].add("sparktui-m-r1", labels("m", 1, 2, engine.port))
    nodes["dgx2"].add("other", {"sparktui.lane": "x", "sparktui.rank": "0"})
    ranks = await discover_lane(nodes, "m")  # type: ignore[arg-type]
    return nodes, ranks


async def test_discover_lane_reads_labels(engine: FakeEngine) -> None:
    _, ranks = await two_node_lane(engine)
    assert [(r.rank, r.node, r.container, r.nranks, r.port) for r in ranks] == [
        (0, "dgx1", "sparktui-m-r0", 2, engine.port), (1, "dgx2", "sparktui-m-r1", 2, engine.port)]


async def test_ready_by_stages_with_times(engine: FakeEngine) -> None:
    nodes, ranks = await two_node_lane(engine)
    watch = LaneWatcher("m", ranks, nodes, "127.0.0.1", stall_after_s=7200,  # type: ignore[arg-type]
                      clock=FastClock(), poll_s=1.0)
    task = asyncio.create_task(watch.run())
    for r, node in ((0, "dgx1"), (1, "dgx2")):
        await nodes[node].log(f"sparktui-m-r{r}", P + "Starting to load model m...")
    for i in range(1, 5):
        await nodes["dgx1"].log("sparktui-m-r0", f"\rLoading safetensors checkpoint shards: "
                                f"{i * 25:3d}% Completed | {i}/4 [00:01<00:01, 1.0s/it]")
    await asyncio.sleep(0.05)
    assert watch.tracker.phase is Phase.LOADING and not task.done()
    await engine.start()  # port opens, /health still 503
    await asyncio.sleep(0.05)
    assert not watch.stages  # the lane's own log has not reached the API phase
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting vLLM server on http://0.0.0.0:8000")
    await until(lambda: "port" in watch.stages)
    await asyncio.sleep(0.05)
    assert "health" not in watch.stages
    engine.health_status = 200
    await asyncio.sleep(0.02)
    engine.models = ["m"]
    result = await asyncio.wait_for(task, 5)
    assert result.outcome is Outcome.READY
    assert list(result.stages) == ["port", "health", "models", "first token"]
    assert result.stages["port"] <= result.stages["health"] <= result.stages["first token"]
    assert result.failure is None


async def test_fatal_line_on_a_worker_rank_exits_early(engine: FakeEngine) -> None:
    nodes, ranks = await two_node_lane(engine)
    watch = LaneWatcher("m", ranks, nodes, "127.0.0.1", stall_after_s=7200,  # type: ignore[arg-type]
                      clock=FastClock(), poll_s=1.0)
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...")
    await nodes["dgx2"].log("sparktui-m-r1", "context before")
    await nodes["dgx2"].log("sparktui-m-r1", "huggingface_hub.errors.LocalEntryNotFoundError: "
                            "Cannot find an appropriate cached snapshot folder")
    # early: a watcher that waited on would end at the stall window (7.2 s of
    # real time here) and say "stalled"; how soon it ends is bench_watch.py's
    # fatal_line_to_exit (a 0.1 s bound here failed on a loaded CI host)
    result = await asyncio.wait_for(task, 5)
    assert result.outcome is Outcome.FAILED
    assert result.failure is not None and result.failure.rank == 1
    assert result.failure.kind is Kind.HF_ENTRY_MISSING
    assert result.failure.context == ("context before",)


async def test_container_exit_fails_the_lane(engine: FakeEngine) -> None:
    nodes, ranks = await two_node_lane(engine)
    watch = LaneWatcher("m", ranks, nodes, "127.0.0.1", stall_after_s=7200,  # type: ignore[arg-type]
                      clock=FastClock(), poll_s=1.0)
    task = asyncio.create_task(watch.run())
    await nodes["dgx2"].log("sparktui-m-r1", P + "Starting to load model m...")
    await asyncio.sleep(0.01)
    await nodes["dgx2"].exit("sparktui-m-r1", 137)
    result = await asyncio.wait_for(task, 5)
    assert result.outcome is Outcome.FAILED
    assert result.failure is not None and result.failure.rank == 1
    assert result.failure.kind is Kind.CONTAINER_EXIT and "SIGKILL" in result.failure.line


async def test_stalled_only_after_the_window_without_progress(engine: FakeEngine) -> None:
    nodes, ranks = await two_node_lane(engine)
    clock = FastClock(speed=2000)
    watch = LaneWatcher("m", ranks, nodes, "127.0.0.1", stall_after_s=600,  # type: ignore[arg-type]
                      clock=clock, poll_s=5.0)
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...")
    # progress every ~100 simulated seconds for ~1000 s: never stalled
    for i in range(1, 11):
        await asyncio.sleep(100 / clock.speed)
        await nodes["dgx1"].log("sparktui-m-r0", f"\rLoading safetensors checkpoint shards: "
                                f"{i:3d}% Completed | {i}/100 [00:01<00:01, 1.0s/it]")
        assert not task.done()
    started_silence = clock.monotonic()
    result = await asyncio.wait_for(task, 5)
    assert result.outcome is Outcome.STALLED
    assert clock.monotonic() - started_silence >= 600 - 100
    assert "shards" in result.last_progress and "10/100" in result.last_progress
    assert result.phase_times[Phase.STALLED] > 1000


async def test_engine_client_against_a_real_server(engine: FakeEngine) -> None:
    async with EngineClient("127.0.0.1", engine.port, timeout=2) as client:
        assert not await client.port_open()
        assert (await client.health()).status is None
        assert await client.models() == []
        await engine.start()
        assert await port_open("127.0.0.1", engine.port)
        assert (await client.health()).status == 503
        engine.health_status = 200
        assert (await client.health()).ok
        engine.models = ["zai-org/GLM-5.3"]
        assert await client.models() == ["zai-org/GLM-5.3"]
        m = await client.metrics()
        assert m["vllm:num_requests_running"] == 2.0 and m["vllm:prompt_tokens_total"] == 1234.0
        ttft = await client.first_token("zai-org/GLM-5.3")
        assert ttft is not None and 0 <= ttft < 2
        engine.stream_chat = False
        assert await client.first_token("zai-org/GLM-5.3") is not None


def test_parse_metrics_sums_label_sets_and_tolerates_garbage() -> None:
    text = ('vllm:num_requests_waiting{engine="0",model_name="m"} 1\n'
            'vllm:num_requests_waiting{engine="1",model_name="m"} 2\n')
    assert parse_metrics(text) == {"vllm:num_requests_waiting": 3.0}
    assert parse_metrics("{{{ not prometheus") == {}


async def test_resident_memory_growth_is_progress_for_a_silent_load(engine: FakeEngine) -> None:
    """Worker ranks and InstantTensor print no shard lines: MemAvailable
    falling on the rank nodes keeps the boot alive; when it stops, stalled."""
    nodes, ranks = await two_node_lane(engine)
    clock = FastClock(speed=2000)
    watch = LaneWatcher("m", ranks, nodes, "127.0.0.1", stall_after_s=300,  # type: ignore[arg-type]
                      clock=clock, poll_s=5.0, resource_poll_s=20.0)
    task = asyncio.create_task(watch.run())
    await nodes["dgx1"].log("sparktui-m-r0", P + "Starting to load model m...")
    for _ in range(15):  # 15 x 60 s = 900 s > stall window, memory keeps filling
        await asyncio.sleep(60 / clock.speed)
        for n in nodes.values():
            n.mem_available_kib -= 2 * 1024 * 1024
        assert not task.done()
    result = await asyncio.wait_for(task, 5)
    assert result.outcome is Outcome.STALLED
    assert "GiB more resident" in result.last_progress
