"""The done-when of the engine dialects: every golden transcript (rendered
from vLLM 0.33/0.11 and SGLang 0.5.23's own strings, tests/fixtures/dialects/)
played through a `docker` stand-in behind a real OpenSSH sshd per node, and
watched by `sparktui wait` (cli/wait_cmd.wait_lane, as the CLI runs it):
ready, failed or stalled as the scenario says, the failing rank and its first
fatal line and root cause in the plain output, the phases in boot order, the
verdict within a second of the fatal line reaching us. A ready lane's engine
answers in its dialect's shapes (``delta.reasoning`` on vLLM 0.33)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from adapters.docker_standin import install
from adapters.openssh_server import SshdUnavailable, openssh_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.golden import SCENARIOS, scenario
from sparktui.cli.wait_cmd import wait_lane
from sparktui.core.config import (
    Config,
    ConsoleConfig,
    HomeAssistantConfig,
    LivenessConfig,
    NodeConfig,
    SimulatorConfig,
    SshConfig,
)
from sparktui.core.logsig import BOOT_ORDER, classify, parse_timestamp
from sparktui.sim.dialects import load

SSH = SshConfig(connect_timeout_s=5.0, keepalive_interval_s=5.0)
MODEL = "zai-org/GLM-4.5-Air-FP8"
STALL_S = 4.0
PHASE_GAP_S = 0.25
"""Written before a line that moves the boot on, so the follower delivers it
in its own batch and `wait` prints the phase it reached."""
GAP_CAP_S = 0.5
"""The transcript's own pauses of a second or more, played this long at most
(order across ranks as logged; a 2 s gap between a rank's exit and the head's
NCCL error stays a gap)."""


@asynccontextmanager
async def engine_http(dialect: str, reasoning: bool, log: Path) -> AsyncIterator[int]:
    """The lane's endpoint as the engine answers it: /health, /v1/models (its
    access line, with the identity tag, written to rank 0's log as uvicorn
    does) and a streamed chat in the dialect's reasoning field."""
    key = load(dialect).entry("delta_reasoning").text.split(":", 1)[0].strip()

    def access(request: web.Request) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".000000000Z"
        with log.open("a") as f:
            f.write(f'{stamp} INFO:     127.0.0.1:5000 - "{request.method} {request.path_qs} '
                    'HTTP/1.1" 200 OK\n')

    async def health(request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(request: web.Request) -> web.Response:
        access(request)
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        delta = {key: "Okay"} if reasoning else {"content": "OK"}
        for d in ({"role": "assistant", "content": ""}, delta):
            await resp.write(("data: " + json.dumps({"object": "chat.completion.chunk",
                                                     "choices": [{"index": 0, "delta": d}]})
                              + "\n\n").encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def _config(tmp: Path, servers: list) -> Config:
    ssh_config = tmp / "ssh_config"
    known = tmp / "known_hosts"
    ssh_config.write_text("".join(
        f"Host spark{i}\n  HostName 127.0.0.1\n  Port {s.port}\n  User {s.user}\n"
        f"  IdentityFile {s.client_key}\n" for i, s in enumerate(servers)))
    known.write_text("".join(s.known_hosts.read_text() for s in servers))
    nodes = {f"dgx{i + 1}": NodeConfig(f"dgx{i + 1}", i, f"spark{i}", "nobody", "127.0.0.2",
                                       f"switch.dgx{i + 1}", "test")
             for i in range(len(servers))}
    return Config(
        path=tmp / "config.toml", nodes=nodes, clusters={}, switches={}, nccl={},
        home_assistant=HomeAssistantConfig(url="http://127.0.0.1:8123", token_file="~/tok"),
        ssh=replace(SSH, known_hosts=str(known), client_keys=(), config_file=str(ssh_config)),
        liveness=LivenessConfig(method="icmp"),
        console=ConsoleConfig(state_dir=str(tmp / "state")),
        simulator=SimulatorConfig(enabled=False))


@pytest.mark.parametrize("name", SCENARIOS)
async def test_transcript_through_real_sshd_and_wait(name: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    meta, ranks = scenario(name)
    want = meta["expect"]
    if want["outcome"] == "failed" and not want.get("boot", True):
        pytest.skip("dies while serving: `wait` has returned ready by then")
    lane, engine = "lane", "sglang" if meta["dialect"].startswith("sglang") else "vllm"
    cmd = (["python3", "-m", "sglang.launch_server", "--model-path", MODEL] if engine == "sglang"
           else ["vllm", "serve", MODEL])
    with ExitStack() as stack:
        states, servers = [], []
        for rank in sorted(ranks):
            bin_dir = tmp_path / f"node{rank}" / "bin"
            install(str(bin_dir))
            try:
                servers.append(stack.enter_context(openssh_server(
                    tmp_path / f"node{rank}", f"SetEnv PATH={bin_dir}:/usr/bin:/bin\n")))
            except SshdUnavailable as exc:
                pytest.skip(str(exc))
            states.append(bin_dir / "state")
        config = _config(tmp_path, servers)
        log0 = states[0] / f"{lane}-r0.log"
        async with AsyncExitStack() as astack:
            port = await astack.enter_async_context(
                engine_http(meta["dialect"], bool(want.get("reasoning")), log0))
            for rank, state in zip(sorted(ranks), states, strict=True):
                labels = {"sparktui.lane": lane, "sparktui.rank": str(rank),
                          "sparktui.nranks": str(len(ranks)), "sparktui.engine": engine}
                if rank == 0:
                    labels["sparktui.port"] = str(port)
                (state / f"{lane}-r{rank}.json").write_text(json.dumps({
                    "Running": True, "ExitCode": 0, "OOMKilled": False,
                    "StartedAt": meta["ranks"][str(rank)]["started"],
                    "FinishedAt": "0001-01-01T00:00:00Z", "Labels": labels, "Cmd": cmd}))
                (state / f"{lane}-r{rank}.log").write_text("")
            task = asyncio.create_task(wait_lane(config, lane, stall_after_s=STALL_S,
                                                 poll_s=0.2))
            await asyncio.sleep(1.0)  # the followers attach
            merged = sorted((ts, rank, i, text) for rank, lines in ranks.items()
                            for i, (ts, text) in enumerate(lines))
            exits = sorted((meta["ranks"][str(r)]["finished"], r) for r in ranks
                           if meta["ranks"][str(r)]["exit_code"] is not None)
            last = parse_timestamp(merged[0][0]) if merged else None
            for ts, rank, _, text in merged:
                while exits and exits[0][0] <= ts:
                    _exit(states, lane, meta, exits.pop(0)[1])
                t = parse_timestamp(ts)
                if t is not None and last is not None and t - last >= 1.0:
                    await asyncio.sleep(min(GAP_CAP_S, t - last))
                last = t
                ev = classify(text)
                if ev is not None and ev.phase in BOOT_ORDER:
                    await asyncio.sleep(PHASE_GAP_S)
                with (states[rank] / f"{lane}-r{rank}.log").open("a", newline="") as f:
                    f.write(f"{ts} {text}\n")
            for _, rank in exits:
                _exit(states, lane, meta, rank)
            written = time.monotonic()
            code = await asyncio.wait_for(task, 60)
            took = time.monotonic() - written
    out = capsys.readouterr().out
    reached = []
    for line in out.splitlines():
        if line.startswith("  [") and "] lane: " in line:
            phase = line.split("] lane: ", 1)[1].split(",")[0].strip()
            if not reached or reached[-1] != phase:
                reached.append(phase)
    if want["outcome"] == "ready":
        assert code == 0, out
        assert "lane: ready (" in out
        # every phase the boot order has, in order, as `wait` printed them
        assert reached == [p for p in want["phases"] if p in reached], (reached, out)
        assert [p for p in want["phases"] if p != "serving"][1:] == \
            [p for p in reached if p != "serving"][1:], (reached, out)
    elif want["outcome"] == "stalled":
        assert code == 2, out
        assert "lane: stalled; last progress: " in out
    else:
        assert code == 1, out
        assert f"lane: failed on rank {want['rank']}: " in out, out
        if want["kind"] != "container_exit":
            assert f"failed on rank {want['rank']}: {want['line']}" in out, out
        if want["cause"]:
            assert f"    cause: {want['cause']}" in out, out
        # early exit, not the stall window: the 1 s figure is measured in bench/bench_watch.py
        # (fatal_line_to_exit); a loaded clean-clone CI run took 1.48 s here once
        assert took < 10.0, f"{name}: verdict {took:.2f} s after the fatal line was written"
        assert reached == [p for p in want["phases"] if p in reached], (reached, out)


def _exit(states: list[Path], lane: str, meta: dict, rank: int) -> None:
    path = states[rank] / f"{lane}-r{rank}.json"
    st = json.loads(path.read_text())
    end = meta["ranks"][str(rank)]
    st.update(Running=False, ExitCode=end["exit_code"], FinishedAt=end["finished"])
    path.write_text(json.dumps(st))
