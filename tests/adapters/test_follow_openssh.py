"""Followers and the lane watcher against a real OpenSSH sshd on loopback
(root sessions refuse signal requests there), with a `docker` stand-in on
the session's PATH: no follower outlives its channel; the earliest fatal rank
is named although its stream starts late; an ~/.ssh/config alias on a
non-default port works for the probe, liveness and engine HTTP."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest
from aiohttp import web

from adapters.docker_standin import install
from adapters.openssh_server import OpenSshServer, SshdUnavailable, openssh_server
from sparktui.adapters.endpoints import NodeEndpoint, resolve_endpoints
from sparktui.adapters.engine_http import EngineClient
from sparktui.adapters.ping import check_liveness
from sparktui.adapters.ssh import NodeConnection
from sparktui.core.clock import SystemClock
from sparktui.core.config import (
    Config,
    ConsoleConfig,
    HomeAssistantConfig,
    LivenessConfig,
    NodeConfig,
    SimulatorConfig,
    SshConfig,
)
from sparktui.core.logsig import Kind
from sparktui.watch.follower import LogFollower, docker_logs_command
from sparktui.watch.lane import FatalDecided, LaneEvent, LaneWatcher, LinesArrived
from sparktui.watch.readiness import RankContainer

SSH = SshConfig(connect_timeout_s=5.0, keepalive_interval_s=5.0)


@dataclass
class Node:
    server: OpenSshServer
    state: Path

    def endpoint(self, name: str = "spark") -> NodeEndpoint:
        s = self.server
        return NodeEndpoint(name, "127.0.0.1", s.port, s.user, str(s.known_hosts),
                            (str(s.client_key),), (), "tcp", "127.0.0.1", None, "127.0.0.1")

    def container(self, name: str, *, running: bool = True, delay: float = 0.0) -> None:
        (self.state / f"{name}.json").write_text(json.dumps({
            "Running": running, "ExitCode": 0, "OOMKilled": False,
            "StartedAt": now_ts(), "FinishedAt": "0001-01-01T00:00:00Z",
            "Labels": {"sparktui.lane": name.rsplit("-r", 1)[0]}, "Cmd": ["vllm", "serve", "m"]}))
        (self.state / f"{name}.log").write_text("")
        if delay:
            (self.state / f"{name}.delay").write_text(str(delay))

    def log(self, name: str, text: str) -> None:
        with (self.state / f"{name}.log").open("a") as f:
            f.write(f"{now_ts()} {text}\n")


def now_ts() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    bin_dir = tmp_path / "bin"
    install(str(bin_dir))
    try:
        with openssh_server(tmp_path, f"SetEnv PATH={bin_dir}:/usr/bin:/bin\n") as server:
            yield Node(server, bin_dir / "state")
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    finally:
        for proc in followers(str(bin_dir)):  # never leave one behind, even on failure
            proc.kill()


def followers(tag: str) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or ())
        if tag in cmd and "logs" in cmd:
            out.append(proc)
    return out


async def gone(tag: str, timeout: float = 5.0) -> list[str]:
    end = time.monotonic() + timeout
    while (left := followers(tag)) and time.monotonic() < end:
        await asyncio.sleep(0.05)
    return [" ".join(p.cmdline()) for p in left if p.is_running()]


async def test_no_follower_outlives_its_channel(node: Node) -> None:
    """A silent `docker logs -f` of a root session: cancelled after one line."""
    conn = NodeConnection(node.endpoint(), SSH)
    tag = "sparktui-orphan-r0"
    node.container(tag)
    node.log(tag, "one line, then silence")
    try:
        for _ in range(3):
            f = LogFollower.for_container(conn, tag, follow=True)
            lines = f.lines()
            assert (await anext(lines)).text == "one line, then silence"
            assert followers(tag), "the stand-in never ran"
            await lines.aclose()  # Ctrl-C of logs -f / wait / serve
            assert await gone(tag) == []
    finally:
        await conn.close()


async def test_a_stream_cancelled_by_the_task_leaves_nothing(node: Node) -> None:
    conn = NodeConnection(node.endpoint(), SSH)
    tag = "sparktui-cancel-r0"
    node.container(tag)

    async def consume() -> None:
        async for _ in conn.stream(docker_logs_command(tag, follow=True)):
            pass

    task = asyncio.create_task(consume())
    try:
        end = time.monotonic() + 5
        while not followers(tag):
            assert time.monotonic() < end
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert await gone(tag) == []
    finally:
        await conn.close()


async def test_earliest_fatal_rank_over_staggered_runs(node: Node) -> None:
    """Rank 1 fails first; its stream starts 1.5 s late; rank 0's "worker
    died" follows 0.4 s later. Ten runs, rank 1 every time."""
    links = {"dgx1": NodeConnection(node.endpoint("dgx1"), SSH),
             "dgx2": NodeConnection(node.endpoint("dgx2"), SSH)}
    latencies = []
    try:
        for run in range(10):
            lane = f"m{run}"
            node.container(f"{lane}-r0")
            node.container(f"{lane}-r1", delay=1.5)
            ranks = [RankContainer(0, "dgx1", f"{lane}-r0", 2, None, "vllm", True),
                     RankContainer(1, "dgx2", f"{lane}-r1", 2, None, "vllm", True)]
            watch = LaneWatcher(lane, ranks, links, "127.0.0.1", stall_after_s=900,  # type: ignore[arg-type]
                                clock=SystemClock(), resource_poll_s=None)
            decided: list[float] = []
            read: list[float] = []

            def on_event(event: LaneEvent, decided: list[float] = decided,
                         read: list[float] = read) -> None:
                if isinstance(event, FatalDecided):
                    decided.append(time.monotonic())
                elif isinstance(event, LinesArrived) and not decided:
                    read.append(time.monotonic())

            watch.subscribe(on_event)
            task = asyncio.create_task(watch.run())
            node.log(f"{lane}-r0", "(EngineCore_DP0 pid=1) INFO 11-29 01:02:03 [x.py:1] "
                                   "Starting to load model m...")
            await asyncio.sleep(0.3)
            node.log(f"{lane}-r1", "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find "
                                   "an appropriate cached snapshot folder")
            await asyncio.sleep(0.4)
            node.log(f"{lane}-r0", "(EngineCore_DP0 pid=1) ERROR 11-29 01:02:04 [x.py:2] Worker "
                                   "proc VllmWorker-1 died unexpectedly (exit code: 1), shutting "
                                   "down executor.")
            written = time.monotonic()
            result = await asyncio.wait_for(task, 30)
            f = result.failure
            assert f is not None and f.rank == 1 and f.kind is Kind.HF_ENTRY_MISSING, (run, f)
            latencies.append((decided[0] - written, decided[0] - read[-1]))
        total = sorted(t for t, _ in latencies)
        after = sorted(a for _, a in latencies)
        print(f"\nlast fatal line written -> verdict over real sshd: median "
              f"{total[len(total) // 2] * 1000:.0f} ms, max {total[-1] * 1000:.0f} ms; "
              f"last rank caught up -> verdict: median {after[len(after) // 2] * 1000:.1f} ms, "
              f"max {after[-1] * 1000:.1f} ms")
    finally:
        for c in links.values():
            await c.close()
    assert await gone(str(node.state.parent)) == []


async def test_ssh_config_alias_on_a_non_default_port(node: Node, tmp_path: Path) -> None:
    """config.toml names the node only by its alias: HostName, Port, User and
    IdentityFile come from the ssh_config; liveness and HTTP use the address."""
    s = node.server
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(f"Host sparkalias\n  HostName 127.0.0.1\n  Port {s.port}\n"
                          f"  User {s.user}\n  IdentityFile {s.client_key}\n")
    async def health(request: web.Request) -> web.Response:
        return web.Response(status=200)

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    http_port = runner.addresses[0][1]
    config = Config(
        path=tmp_path / "config.toml",
        nodes={"dgx1": NodeConfig("dgx1", 0, "sparkalias", "nobody", "127.0.0.2", "switch.x",
                                  "test")},
        clusters={}, switches={}, nccl={},
        home_assistant=HomeAssistantConfig(url="http://127.0.0.1:8123", token_file="~/tok"),
        ssh=replace(SSH, known_hosts=str(s.known_hosts), client_keys=(),
                    config_file=str(ssh_config)),
        liveness=LivenessConfig(method="icmp"),
        console=ConsoleConfig(state_dir=str(tmp_path / "state")),
        simulator=SimulatorConfig(enabled=False),
    )
    ep = resolve_endpoints(config).node("dgx1")
    assert (ep.ssh_port, ep.username, ep.client_keys) == (s.port, s.user, (str(s.client_key),))
    assert ep.liveness_host == ep.api_host == "127.0.0.1"
    conn = NodeConnection(ep, config.ssh)
    try:
        assert (await conn.probe("echo via-alias", timeout=10)).strip() == "via-alias"
        if shutil.which("ping"):
            assert await check_liveness(ep, 5.0)
        async with EngineClient(ep.api_host, http_port, timeout=5) as client:
            assert (await client.health()).ok
    finally:
        await conn.close()
        await runner.cleanup()


async def test_reads_share_one_long_lived_shell_apart_from_the_probe(node: Node) -> None:
    """The fatal decision's one-shot reads: no session per read (the same
    shell answers), the exit status kept, not the probe's shell."""
    conn = NodeConnection(node.endpoint(), SSH)
    node.container("reads-r0")
    node.log("reads-r0", "a line")
    try:
        first = await conn.read("echo $$", 10)
        assert (await conn.read("echo $$", 10)).stdout == first.stdout
        assert (await conn.probe("echo $$", 10)) != first.stdout
        logs = await conn.read(docker_logs_command("reads-r0", follow=False), 10)
        assert logs.exit_status == 0 and logs.stdout.endswith("a line\n")
        assert (await conn.read("(exit 3)", 10)).exit_status == 3
    finally:
        await conn.close()
    assert await gone(str(node.state.parent)) == []
