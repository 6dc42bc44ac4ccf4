"""Liveness checks: TCP connect on loopback, and the system ping (faked or real)."""

from __future__ import annotations

import asyncio
import shutil
import socket
from pathlib import Path

import pytest

from sparktui.adapters.endpoints import NodeEndpoint
from sparktui.adapters.ping import check_liveness, icmp_alive, tcp_alive


def ep(method: str, port: int | None) -> NodeEndpoint:
    return NodeEndpoint(
        "dgx1", "127.0.0.1", 22, "op", "kh", (), (), method, "127.0.0.1", port, "127.0.0.1"
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_tcp_alive_only_when_accepted() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        assert await check_liveness(ep("tcp", port), 1.0)
    finally:
        server.close()
        await server.wait_closed()
    assert not await tcp_alive("127.0.0.1", closed_port(), 1.0)


async def test_tcp_without_port_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="liveness_port"):
        await check_liveness(ep("tcp", None), 1.0)


async def test_icmp_uses_exit_status_of_ping(tmp_path: Path) -> None:
    fake = tmp_path / "ping"
    fake.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$(dirname "$0")/args"\n[ "$6" = 127.0.0.1 ]\n'
    )
    fake.chmod(0o755)
    assert await icmp_alive("127.0.0.1", 0.5, executable=str(fake))
    assert (tmp_path / "args").read_text().split() == ["-n", "-c", "1", "-W", "1", "127.0.0.1"]
    assert not await icmp_alive("127.0.0.2", 0.5, executable=str(fake))
    with pytest.raises(OSError, match="install iputils-ping"):
        await icmp_alive("127.0.0.1", 0.5, executable=str(tmp_path / "missing"))
    with pytest.raises(ValueError):
        await icmp_alive("-f", 0.5, executable=str(fake))


async def test_icmp_kills_a_hung_ping(tmp_path: Path) -> None:
    fake = tmp_path / "ping"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert not await icmp_alive("127.0.0.1", 0.2, executable=str(fake))
    assert loop.time() - t0 < 5


@pytest.mark.skipif(
    shutil.which("ping") is None, reason="no system ping (apt-get install iputils-ping)"
)
async def test_real_ping_of_loopback() -> None:
    assert await icmp_alive("127.0.0.1", 1.0)
