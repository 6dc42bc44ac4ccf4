"""NodeConnection against a real OpenSSH sshd on loopback (skipped without one)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.openssh_server import OpenSshServer, SshdUnavailable, openssh_server
from sparktui.adapters.endpoints import NodeEndpoint
from sparktui.adapters.ssh import NodeConnection, ProbeStalled
from sparktui.core.config import NodeConfig, SshConfig
from sparktui.core.probe import FAST_SECTIONS, parse_probe, probe_script

SSH = SshConfig(connect_timeout_s=5.0, keepalive_interval_s=5.0)


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[OpenSshServer]:
    try:
        with openssh_server(tmp_path) as server:
            yield server
    except SshdUnavailable as exc:
        pytest.skip(str(exc))


def endpoint(s: OpenSshServer) -> NodeEndpoint:
    return NodeEndpoint(
        "spark",
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


async def test_probe_script_over_real_sshd_parses(sshd: OpenSshServer) -> None:
    conn = NodeConnection(endpoint(sshd), SSH)
    node = NodeConfig("spark", 0, "h", "u", "10.0.0.1", "switch.x", "test", hf_cache="/nope")
    try:
        result = parse_probe(await conn.probe(probe_script(node), timeout=10))
        assert result.meminfo is not None and result.kernel and result.loadavg
        again = parse_probe(await conn.probe(probe_script(node), timeout=10))
        assert again.uptime_s is not None and again.uptime_s >= (result.uptime_s or 0)
        assert conn.connects == 1
    finally:
        await conn.close()


async def test_long_lived_shell_is_faster_than_exec_per_poll(sshd: OpenSshServer) -> None:
    """The measured fact behind the design, on this host: a probe over the
    long-lived shell costs less than a new exec channel per probe."""
    conn = NodeConnection(endpoint(sshd), SSH)
    try:
        await conn.probe("true", timeout=10)
        await conn.run("true", timeout=10)
        t0 = time.perf_counter()
        for _ in range(5):
            await conn.probe("cat /proc/loadavg 2>&1", timeout=10)
        shell = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(5):
            await conn.run("cat /proc/loadavg 2>&1", timeout=10)
        execs = time.perf_counter() - t0
        assert shell < execs
    finally:
        await conn.close()


async def test_stall_then_stream_over_real_sshd(sshd: OpenSshServer) -> None:
    conn = NodeConnection(endpoint(sshd), SSH)
    try:
        with pytest.raises(ProbeStalled):
            await conn.probe("sleep 2", timeout=0.3)
        assert await conn.probe("echo fresh", timeout=10) == "fresh\n"
        chunks = [c async for c in conn.stream("seq 1 3; echo err >&2 2>&1")]
        assert b"".join(chunks) == b"1\n2\n3\n"
        stream = conn.stream("while :; do echo tick; sleep 0.05; done")
        assert (await anext(stream)).startswith(b"tick")
        await stream.aclose()
        await asyncio.sleep(0.2)
        result = await conn.run("pgrep -fc 'echo [t]ick' || true", timeout=10)
        assert result.stdout.strip() in ("0", "")
    finally:
        await conn.close()


async def test_the_fast_tick_starts_no_process_on_the_node(sshd: OpenSshServer,
                                                           tmp_path: Path) -> None:
    """0 forks on the fast tick, counted: strace follows the long-lived shell
    while it answers fast probes; only the control command (/bin/true, run
    until the tracer sees it) may start processes. Without strace, the weaker
    check still holds: the fast probe works with PATH pointing nowhere."""
    conn = NodeConnection(endpoint(sshd), SSH)
    node = NodeConfig("spark", 0, "h", "u", "10.0.0.1", "switch.x", "test")
    fast = probe_script(node, FAST_SECTIONS)
    try:
        shell_pid = int((await conn.probe("echo $$", timeout=10)).strip())
        await conn.probe("PATH=/nonexistent", timeout=10)
        result = parse_probe(await conn.probe(fast, timeout=10), FAST_SECTIONS)
        assert result.meminfo is not None and result.loadavg is not None, result.problems
        assert result.uptime_s is not None and result.problems == ()
        await conn.probe("PATH=/usr/bin:/bin", timeout=10)
        strace = shutil.which("strace")
        if strace is None:
            pytest.skip("strace not installed: forks not counted (PATH check passed)")
        trace = tmp_path / "trace"
        tracer = subprocess.Popen(
            [strace, "-f", "-qq", "-e", "trace=clone,clone3,fork,vfork,execve",
             "-o", str(trace), "-p", str(shell_pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 20
            while "/bin/true" not in (trace.read_text() if trace.exists() else ""):
                assert time.monotonic() < deadline, "strace never saw the control command"
                await conn.probe("/bin/true", timeout=10)
                await asyncio.sleep(0.1)
            seen = trace.read_text().count('execve("/bin/true"')
            for _ in range(10):
                out = parse_probe(await conn.probe(fast, timeout=10), FAST_SECTIONS)
                assert out.meminfo is not None
            await conn.probe("/bin/true", timeout=10)  # the trace reaches past the ticks
            deadline = time.monotonic() + 20
            while trace.read_text().count('execve("/bin/true"') <= seen:
                assert time.monotonic() < deadline, trace.read_text()[-2000:]
                await asyncio.sleep(0.1)
        finally:
            tracer.terminate()
            tracer.wait(timeout=10)
        lines = trace.read_text().splitlines()
        forks = [ln for ln in lines if re.search(r"\b(clone3?|v?fork)\(", ln)]
        execs = [ln for ln in lines if "execve(" in ln]
        assert execs and all('execve("/bin/true"' in ln for ln in execs), execs
        assert len(forks) == len(execs), forks   # one per control, none per fast tick
    finally:
        await conn.close()
