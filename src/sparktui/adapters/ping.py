"""Liveness: does the node's kernel still answer, whatever sshd is doing?

This is the other half of the OOM-thrash signature (ping answers, sshd is
starved). Two methods, chosen by ``[liveness] method``:

- ``icmp``: runs the system ``ping -n -c 1 -W N host``. A raw ICMP socket
  needs CAP_NET_RAW, and unprivileged ICMP datagram sockets only work where
  ``net.ipv4.ping_group_range`` allows them; the system ping is installed with
  the needed capability on every distribution. One short-lived process per
  node per tick is cheap at cluster sizes (and the argv never goes through a
  shell).
- ``tcp``: a TCP connect to ``liveness_host:liveness_port`` (the simulator's
  nodes, or a port a live node always listens on). Only an accepted
  connection counts as alive: a refusal means nothing listens there.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable

from sparktui.adapters.endpoints import NodeEndpoint

LivenessCheck = Callable[[NodeEndpoint, float], Awaitable[bool]]
"""``await check(endpoint, timeout_s) -> alive``; never raises for a dead node,
only when the check itself cannot run (ValueError, OSError)."""


async def tcp_alive(host: str, port: int, timeout: float) -> bool:
    """True when a TCP connection to host:port is accepted within ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError, TimeoutError):
        async with asyncio.timeout(timeout):
            await writer.wait_closed()
    return True


async def icmp_alive(host: str, timeout: float, *, executable: str = "ping") -> bool:
    """True when one ICMP echo to ``host`` is answered (system ping, exit 0).
    Raises OSError when ping cannot be run at all: that says nothing about the node."""
    if not host or host.startswith("-"):
        raise ValueError(f"not a host name: {host!r}")
    wait_s = str(max(1, math.ceil(timeout)))
    try:
        proc = await asyncio.create_subprocess_exec(
            executable,
            "-n",
            "-c",
            "1",
            "-W",
            wait_s,
            host,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError as exc:
        raise OSError(
            f"cannot run {executable!r} ({exc.strerror or exc}): install iputils-ping "
            'or set [liveness] method = "tcp"'
        ) from None
    try:
        async with asyncio.timeout(float(wait_s) + 1.0):
            return await proc.wait() == 0
    except TimeoutError:
        return False
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def check_liveness(endpoint: NodeEndpoint, timeout: float) -> bool:
    """The configured liveness check for one node."""
    if endpoint.liveness_method == "tcp":
        if endpoint.liveness_port is None:
            raise ValueError(f"{endpoint.name}: liveness method tcp needs a liveness_port")
        return await tcp_alive(endpoint.liveness_host, endpoint.liveness_port, timeout)
    return await icmp_alive(endpoint.liveness_host, timeout)
