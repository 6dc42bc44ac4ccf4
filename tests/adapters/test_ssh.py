"""NodeConnection against a scripted asyncssh server on loopback."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import asyncssh
import pytest

from adapters.ssh_test_server import SshTestServer, run_locally
from sparktui.adapters.ssh import (
    AuthError,
    HostKeyError,
    LoginStalled,
    NodeConnection,
    ProbeStalled,
)
from sparktui.core.config import SshConfig
from sparktui.core.errors import RemoteError

SSH = SshConfig(connect_timeout_s=3.0, keepalive_interval_s=0, keepalive_count_max=3)


class ManualClock:
    """Monotonic time that only moves when the test says so (for backoff)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
async def node(ssh_server: SshTestServer):
    conn = NodeConnection(ssh_server.endpoint(), SSH)
    yield conn
    await conn.close()


async def test_run_returns_status_stdout_stderr(node: NodeConnection) -> None:
    result = await node.run("echo out; echo err >&2; exit 3", timeout=5)
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok


async def test_run_with_input_feeds_stdin_then_eof(node: NodeConnection) -> None:
    async def chunks():
        for part in (b"abc", b"\x00\xff" * 40000, b"xyz"):
            yield part

    result = await node.run_with_input("wc -c; echo done >&2; exit 4", chunks(), timeout=10)
    assert result.exit_status == 4
    assert result.stdout.split() == [str(6 + 80000), "done"]


async def test_run_with_input_passes_the_source_error_through(node: NodeConnection) -> None:
    async def failing():
        yield b"partial"
        raise RemoteError("dgx5", "docker save img", "source died")

    with pytest.raises(RemoteError) as err:
        await node.run_with_input("cat >/dev/null", failing(), timeout=10)
    assert err.value.node == "dgx5"


async def test_run_replaces_invalid_utf8(node: NodeConnection) -> None:
    result = await node.run(r"printf 'a\377b\n'", timeout=5)
    assert result.stdout == "a\ufffdb\n"


async def test_run_timeout_names_node_and_command(node: NodeConnection) -> None:
    with pytest.raises(RemoteError) as err:
        await node.run("sleep 5", timeout=0.3)
    assert err.value.node == "dgx1"
    assert err.value.command == "sleep 5"
    assert "timed out" in str(err.value)


async def test_probe_reads_up_to_sentinel_and_reuses_one_shell(
    node: NodeConnection, ssh_server: SshTestServer
) -> None:
    first = await node.probe("echo @@a; echo one; false", timeout=5)
    second = await node.probe("echo two 2>&1", timeout=5)
    assert first == "@@a\none\n"
    assert second == "two\n"
    assert ssh_server.processes_started == 1
    assert node.connects == 1


async def test_a_sentinel_line_with_another_nonce_is_output(node: NodeConnection) -> None:
    """Only this call's nonce ends its read: a line that looks like the sentinel
    (a log quoted, an earlier command's) is part of the output."""
    out = await node.probe('echo "@@sparktui-done 0123abcd 7"; echo after', timeout=5)
    assert out == "@@sparktui-done 0123abcd 7\nafter\n"
    result = await node.read("echo '@@sparktui-done 99 3'; false", timeout=5)
    assert result.stdout == "@@sparktui-done 99 3\n" and result.exit_status == 1


async def test_probe_output_without_trailing_newline(node: NodeConnection) -> None:
    assert await node.probe("printf 'no-newline'", timeout=5) == "no-newline"


async def test_stalled_shell_is_replaced_and_raises_probe_stalled(
    node: NodeConnection, ssh_server: SshTestServer
) -> None:
    await node.probe("true", timeout=5)
    with pytest.raises(ProbeStalled) as err:
        await node.probe("sleep 3", timeout=0.3)
    assert err.value.node == "dgx1"
    # a fresh shell answers the next probe; the connection itself survived
    assert await node.probe("echo back", timeout=5) == "back\n"
    assert ssh_server.processes_started == 2
    assert node.connects == 1


async def test_stream_yields_chunks_until_exit(node: NodeConnection) -> None:
    chunks = [c async for c in node.stream("printf 'a\\nb'; printf '\\377' 2>&1")]
    assert b"".join(chunks) == b"a\nb\xff"


async def test_stream_aclose_ends_remote_process(ssh_server: SshTestServer) -> None:
    ended = asyncio.Event()

    async def endless(process: asyncssh.SSHServerProcess) -> None:
        try:
            while True:
                process.stdout.write(b"line\n")
                await process.stdout.drain()
                await asyncio.sleep(0.01)
        except (OSError, asyncssh.Error):
            pass
        finally:
            ended.set()

    ssh_server.handler = endless
    conn = NodeConnection(ssh_server.endpoint(), SSH)
    try:
        stream = conn.stream("docker logs -f x 2>&1")
        first = await anext(stream)
        assert first.startswith(b"line")
        await stream.aclose()
        async with asyncio.timeout(3):
            await ended.wait()
    finally:
        await conn.close()


async def test_stream_cancel_ends_remote_process(ssh_server: SshTestServer) -> None:
    ended = asyncio.Event()
    got_line = asyncio.Event()

    async def endless(process: asyncssh.SSHServerProcess) -> None:
        try:
            while True:
                process.stdout.write(b"x\n")
                await process.stdout.drain()
                await asyncio.sleep(0.01)
        except (OSError, asyncssh.Error):
            pass
        finally:
            ended.set()

    async def follow(conn: NodeConnection) -> None:
        async for _ in conn.stream("journalctl -k -f"):
            got_line.set()

    ssh_server.handler = endless
    conn = NodeConnection(ssh_server.endpoint(), SSH)
    try:
        task = asyncio.create_task(follow(conn))
        async with asyncio.timeout(3):
            await got_line.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with asyncio.timeout(3):
            await ended.wait()
    finally:
        await conn.close()


async def test_reconnects_after_server_restart_with_backoff(ssh_server: SshTestServer) -> None:
    clock = ManualClock()
    conn = NodeConnection(ssh_server.endpoint(), SSH, clock=clock)
    try:
        assert await conn.probe("echo up", timeout=5) == "up\n"
        await ssh_server.stop()  # power off: connection dropped, port closed
        with pytest.raises(RemoteError):
            await conn.probe("echo up", timeout=2)
        with pytest.raises(RemoteError) as refused:
            await conn.probe("echo up", timeout=2)
        assert "next attempt" not in str(refused.value) or conn.connects == 1
        # inside the backoff window: fails fast without touching the network
        with pytest.raises(RemoteError) as backoff:
            await conn.run("true", timeout=2)
        assert "next attempt in" in str(backoff.value)
        await ssh_server.start()  # power back on, same port and host key
        clock.now += 60
        assert await conn.probe("echo again", timeout=5) == "again\n"
        assert conn.connects == 2
    finally:
        await conn.close()


async def test_backoff_doubles_up_to_cap(ssh_server: SshTestServer) -> None:
    clock = ManualClock()
    await ssh_server.stop()
    conn = NodeConnection(
        ssh_server.endpoint(), SSH, clock=clock, backoff_initial_s=1, backoff_max_s=4
    )
    waits = []
    for _ in range(4):
        with pytest.raises(RemoteError):
            await conn.run("true", timeout=2)
        with pytest.raises(RemoteError) as err:
            await conn.run("true", timeout=2)
        waits.append(str(err.value).rsplit("next attempt in ", 1)[1])
        clock.now += 100
    assert waits == ["1.0 s)", "2.0 s)", "4.0 s)", "4.0 s)"]


async def test_a_cancel_that_arrives_as_the_connect_fails_still_cancels(
        ssh_server: SshTestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncssh bounds its connect with asyncio.wait_for, which on Python 3.11
    returns the connect's failure instead of a cancellation that arrived in the
    same turn (CPython gh-86296). Seen when a node lost power as its lane's
    watch stopped: the log follower took the failure for a refusal, retried,
    and the stop waited on it for ever. The stand-in connect below is that
    race, made certain: it is cancelled by its own refusal."""
    async def connect_cancelled_as_refused(*args: object, **kwargs: object) -> None:
        caller = asyncio.current_task()
        assert caller is not None

        async def refused() -> None:
            caller.cancel()  # the owner lets go ...
            raise ConnectionRefusedError(111, "Connection refused")  # ... as the port refuses

        return await asyncio.wait_for(refused(), 5)

    monkeypatch.setattr(asyncssh, "connect", connect_cancelled_as_refused)
    conn = NodeConnection(ssh_server.endpoint(), SSH)
    try:
        attempt = asyncio.create_task(conn.run("true", timeout=2))
        with pytest.raises(asyncio.CancelledError):
            await attempt
        assert attempt.cancelled()
        # without a pending cancel the same failure is the refusal it is
        monkeypatch.setattr(asyncssh, "connect", _refuse)
        conn = NodeConnection(ssh_server.endpoint(), SSH)
        with pytest.raises(RemoteError, match="ConnectionRefusedError"):
            await conn.run("true", timeout=2)
    finally:
        await conn.close()


async def _refuse(*args: object, **kwargs: object) -> None:
    raise ConnectionRefusedError(111, "Connection refused")


async def test_changed_host_key_is_a_specific_error(ssh_server: SshTestServer) -> None:
    ssh_server.trust(asyncssh.generate_private_key("ssh-ed25519"))  # known_hosts has another key
    conn = NodeConnection(ssh_server.endpoint(), SSH)
    with pytest.raises(HostKeyError) as err:
        await conn.run("true", timeout=5)
    assert err.value.kind == "changed"
    assert "HOST KEY CHANGED" in str(err.value)
    assert ssh_server.host_key.get_fingerprint() in str(err.value)
    assert not conn.connected


async def test_unknown_host_key_is_refused(ssh_server: SshTestServer) -> None:
    other_port = ssh_server.host_key.export_public_key().decode().strip()
    ssh_server.known_hosts_path.write_text(f"[127.0.0.1]:1 {other_port}\n")
    conn = NodeConnection(ssh_server.endpoint(), SSH)
    with pytest.raises(HostKeyError) as err:
        await conn.probe("true", timeout=5)
    assert err.value.kind == "unknown"
    assert "never accepts an unknown key" in str(err.value)


async def test_missing_known_hosts_file(ssh_server: SshTestServer) -> None:
    ep = ssh_server.endpoint(known_hosts=str(ssh_server.tmp / "nope"))
    with pytest.raises(HostKeyError) as err:
        await NodeConnection(ep, SSH).run("true", timeout=5)
    assert err.value.kind == "no_known_hosts"


async def test_refused_key_is_auth_error(ssh_server: SshTestServer) -> None:
    other = ssh_server.tmp / "other_key"
    other.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    ep = ssh_server.endpoint(client_keys=(str(other),))
    with pytest.raises(AuthError):
        await NodeConnection(ep, SSH).run("true", timeout=5)


async def test_shell_that_never_answers_from_the_start_drops_the_connection(
    ssh_server: SshTestServer,
) -> None:
    async def silent(process: asyncssh.SSHServerProcess) -> None:
        await asyncio.sleep(30)

    ssh_server.handler = silent
    conn = NodeConnection(ssh_server.endpoint(), replace(SSH, connect_timeout_s=0.5))
    try:
        # a shell that never started stalled the login, not a probe: its
        # budget is connect_timeout_s, not the probe's
        with pytest.raises(LoginStalled) as first:
            await conn.probe("true", timeout=0.1)
        assert "login shell did not start within 0.5 s" in str(first.value)
        assert not conn.connected  # even a fresh shell stalled: start over next time
        with pytest.raises(LoginStalled):
            await conn.probe("true", timeout=0.1)
        assert conn.connects == 2
    finally:
        await conn.close()


async def test_slow_login_shell_is_not_probe_time(ssh_server: SshTestServer) -> None:
    """A .bashrc that takes seconds (pyenv init) is login time: the first probe
    of a healthy node still answers within a probe timeout shorter than it."""

    async def slow_bashrc(process: asyncssh.SSHServerProcess) -> None:
        await asyncio.sleep(0.8)
        await run_locally(process)

    ssh_server.handler = slow_bashrc
    conn = NodeConnection(ssh_server.endpoint(), SSH)
    try:
        assert await conn.probe("echo fine", timeout=0.3) == "fine\n"
        assert await conn.probe("echo again", timeout=0.3) == "again\n"
    finally:
        await conn.close()


async def test_fleet_builds_one_connection_per_node_and_closes_them(
    ssh_server: SshTestServer,
) -> None:
    from sparktui.adapters.endpoints import Endpoints
    from sparktui.adapters.ssh import Fleet
    from sparktui.core.config import Config, HomeAssistantConfig, NodeConfig

    nodes = {
        n: NodeConfig(n, i, "h", "operator", "10.0.0.1", f"switch.{n}", "test")
        for i, n in enumerate(["dgx1", "dgx2"])
    }
    config = Config(Path("c.toml"), nodes, {}, {}, {}, HomeAssistantConfig("http://127.0.0.1:1"))
    endpoints = Endpoints(
        {n: ssh_server.endpoint(n) for n in nodes}, "http://127.0.0.1:1", "t", simulated=True
    )
    async with Fleet.from_config(config, endpoints) as fleet:
        assert len(fleet) == 2 and [c.name for c in fleet] == ["dgx1", "dgx2"]
        outs = await asyncio.gather(*(c.probe("echo hi", timeout=5) for c in fleet))
        assert outs == ["hi\n", "hi\n"]
        assert fleet.get("dgx2").connected
    assert not any(c.connected for c in fleet)
