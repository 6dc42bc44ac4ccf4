"""One poll round of N nodes: the long-lived shell vs an exec channel per poll
vs spawning OpenSSH's `ssh` per node per poll.

The simulated cluster runs in a child process, so the client CPU measured
here (this process, plus its `ssh` children for the third way) is the
console's own. Optionally the same comparison against a real OpenSSH sshd on
loopback (``--openssh``, N connections to one private sshd), which is what the
issue's measured fact (~900 ms vs ~14 ms for 8 nodes) refers to.

    .venv/bin/python bench/bench_poll.py                 # 8, 32, 64 sim nodes
    .venv/bin/python bench/bench_poll.py --openssh       # plus real sshd, 8 nodes
    .venv/bin/python bench/bench_poll.py --sizes 8 --rounds 50

Targets (issue 4): 8 nodes <= 20 ms per round on loopback; 64 nodes at 1 Hz
<= 20 % of one core (CPU per round of 64 nodes <= 200 ms). Issue 16: the
8-node fast tick (the poller's round but every slow_probe_interval_s) against
a real sshd <= 20 ms, beside the transport-only reference (an empty probe).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from sparktui.adapters.endpoints import NodeEndpoint
from sparktui.adapters.ssh import NodeConnection
from sparktui.core.config import NodeConfig, SshConfig
from sparktui.core.probe import FAST_SECTIONS, parse_probe, probe_script

SSH = SshConfig(connect_timeout_s=20.0, keepalive_interval_s=0)
PROBE_TIMEOUT_S = 30.0


# -- the simulated cluster, in a child process --------------------------------


async def serve_sim(n_nodes: int) -> None:
    """Child: run a simulator of n nodes; print its endpoints; stop on stdin EOF."""
    from sparktui.sim.spec import small_spec
    from sparktui.sim.testing import running_sim

    async with running_sim(spec=small_spec(n_nodes)) as sim:
        info = sim.endpoints()
        info["users"] = {n: node.spec.user for n, node in sim.nodes.items()}
        info["hf_cache"] = {n: node.spec.hf_cache_path for n, node in sim.nodes.items()}
        print(json.dumps(info), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


@dataclass
class Target:
    endpoints: list[NodeEndpoint]
    nodes: list[NodeConfig]
    server_pid: int | None = None
    """The simulator's process, whose CPU is reported beside the client's."""


@contextlib.contextmanager
def sim_process(n_nodes: int):
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve-sim", str(n_nodes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        info = json.loads(child.stdout.readline())
        eps, nodes = [], []
        for name, ep in info["nodes"].items():
            eps.append(
                NodeEndpoint(
                    name,
                    ep["host"],
                    ep["port"],
                    info["users"][name],
                    info["known_hosts"],
                    (info["client_key"],),
                    (),
                    "tcp",
                    ep["api_host"],
                    ep["liveness_port"],
                    ep["api_host"],
                )
            )
            nodes.append(
                NodeConfig(
                    name,
                    len(nodes),
                    ep["host"],
                    info["users"][name],
                    "127.0.0.1",
                    f"switch.{name}",
                    "bench",
                    hf_cache=info["hf_cache"][name],
                )
            )
        yield Target(eps, nodes, child.pid)
    finally:
        if child.stdin:
            child.stdin.close()
        child.wait(timeout=30)


@contextlib.contextmanager
def openssh_target(n_nodes: int, tmp: Path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from adapters.openssh_server import openssh_server

    with openssh_server(tmp) as s:
        eps = [
            NodeEndpoint(
                f"conn{i}",
                "127.0.0.1",
                s.port,
                s.user,
                str(s.known_hosts),
                (str(s.client_key),),
                (),
                "tcp",
                "127.0.0.1",
                None,
                "127.0.0.1",
            )
            for i in range(n_nodes)
        ]
        nodes = [
            NodeConfig(
                ep.name,
                i,
                "127.0.0.1",
                s.user,
                "127.0.0.1",
                "switch.x",
                "bench",
                hf_cache="/nonexistent",
            )
            for i, ep in enumerate(eps)
        ]
        yield Target(eps, nodes)


# -- the three ways of polling ------------------------------------------------


@dataclass
class Result:
    way: str
    rounds: int
    wall_ms: float
    """Median wall time of one round."""
    cpu_ms: float
    """Client CPU (this process + children) per round, mean."""
    server_cpu_ms: float | None
    """The simulator's CPU per round (on a real cluster, spent on the nodes)."""


def cpu_now() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def server_cpu(pid: int | None) -> float | None:
    if pid is None:
        return None
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def measure(
    way: str, rounds: int, one_round: Callable[[], Awaitable[None]], server_pid: int | None
) -> Result:
    await one_round()  # warm-up: connections, shells, caches
    walls = []
    cpu0, server0 = cpu_now(), server_cpu(server_pid)
    for _ in range(rounds):
        t0 = time.perf_counter()
        await one_round()
        walls.append(time.perf_counter() - t0)
    cpu = (cpu_now() - cpu0) / rounds
    server1 = server_cpu(server_pid)
    server = (server1 - server0) / rounds * 1000 if server0 is not None and server1 else None
    return Result(way, rounds, statistics.median(walls) * 1000, cpu * 1000, server)


async def bench_target(
    target: Target, rounds: int, ssh_rounds: int, *, transport: bool = False
) -> list[Result]:
    """The three ways on one target; ``transport`` adds an empty probe over the
    shell, to separate SSH cost from the cost of running the probe's commands."""
    conns = [NodeConnection(ep, SSH) for ep in target.endpoints]
    pid = target.server_pid
    scripts = [probe_script(n) for n in target.nodes]
    fast_scripts = [probe_script(n, FAST_SECTIONS) for n in target.nodes]

    async def fast_round() -> None:
        outs = await asyncio.gather(
            *(c.probe(s, PROBE_TIMEOUT_S) for c, s in zip(conns, fast_scripts, strict=True))
        )
        for out in outs:
            if parse_probe(out, FAST_SECTIONS).problems:
                raise RuntimeError(f"fast tick: {parse_probe(out, FAST_SECTIONS).problems}")

    async def shell_round() -> None:
        outs = await asyncio.gather(
            *(c.probe(s, PROBE_TIMEOUT_S) for c, s in zip(conns, scripts, strict=True))
        )
        for out in outs:
            if parse_probe(out).meminfo is None:
                raise RuntimeError("probe came back without meminfo")

    async def transport_round() -> None:
        await asyncio.gather(*(c.probe("echo @@end", PROBE_TIMEOUT_S) for c in conns))

    async def exec_round() -> None:
        results = await asyncio.gather(
            *(c.run(s, PROBE_TIMEOUT_S) for c, s in zip(conns, scripts, strict=True))
        )
        for r in results:
            if parse_probe(r.stdout).meminfo is None:
                raise RuntimeError("exec probe came back without meminfo")

    async def spawn_one(ep: NodeEndpoint, script: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            "ssh",
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={ep.known_hosts}",
            "-o",
            "IdentitiesOnly=yes",
            "-i",
            ep.client_keys[0],
            "-p",
            str(ep.ssh_port),
            "-l",
            ep.username,
            ep.ssh_host,
            "sh",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            out, err = await proc.communicate(script.encode())
        if parse_probe(out.decode(errors="replace")).meminfo is None:
            raise RuntimeError(f"ssh probe failed: {err.decode(errors='replace')[:200]}")

    async def spawn_round() -> None:
        await asyncio.gather(
            *(spawn_one(ep, s) for ep, s in zip(target.endpoints, scripts, strict=True))
        )

    try:
        results = [
            await measure("fast tick (sh builtins, no fork)", rounds, fast_round, pid),
            await measure("long-lived shell, both tiers (10 commands)", rounds, shell_round, pid),
            await measure("exec per poll", max(3, rounds // 4), exec_round, pid),
        ]
        if transport:
            results.append(
                await measure("shell, empty probe (transport only)", rounds, transport_round, pid)
            )
        if shutil.which("ssh") and ssh_rounds:
            results.append(await measure("spawn ssh per node", ssh_rounds, spawn_round, pid))
        return results
    finally:
        await asyncio.gather(*(c.close() for c in conns))


def report(title: str, n: int, results: list[Result]) -> list[str]:
    base = results[0]
    lines = [
        f"{title}, {n} nodes",
        "| way | rounds | wall ms/round (median) | client CPU ms/round | wall vs fast tick "
        "| CPU vs fast tick | client CPU at 1 Hz | sim server CPU ms/round |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.way} | {r.rounds} | {r.wall_ms:.1f} | {r.cpu_ms:.1f} "
            f"| {r.wall_ms / base.wall_ms:.1f}x | {r.cpu_ms / base.cpu_ms:.1f}x "
            f"| {r.cpu_ms / 10:.1f} % "
            f"| {'-' if r.server_cpu_ms is None else f'{r.server_cpu_ms:.1f}'} |"
        )
    return lines


async def run(args: argparse.Namespace) -> None:
    out: list[str] = [
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
    ]
    for n in args.sizes:
        with sim_process(n) as target:
            results = await bench_target(target, args.rounds, args.ssh_rounds)
        out += [*report("simulator (asyncssh server in a child process)", n, results), ""]
    if args.openssh:
        with tempfile.TemporaryDirectory() as tmp, openssh_target(8, Path(tmp)) as target:
            results = await bench_target(target, args.rounds, args.ssh_rounds, transport=True)
        out += [*report("real OpenSSH sshd on loopback (8 connections)", 8, results), ""]
    print("\n".join(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[8, 32, 64],
                        help="simulated cluster sizes (none: only --openssh)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--ssh-rounds", type=int, default=3, help="0 skips spawning ssh")
    parser.add_argument("--openssh", action="store_true", help="also bench a real sshd")
    parser.add_argument("--serve-sim", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_sim:
        asyncio.run(serve_sim(args.serve_sim))
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
