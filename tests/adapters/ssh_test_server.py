"""A scripted asyncssh server on a loopback port, the way asyncssh tests itself.

Each exec request runs the command with the local ``/bin/sh`` (so the
long-lived shell and the sentinel protocol are exercised against a real
shell), unless ``handler`` is set to script a different behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from sparktui.adapters.endpoints import NodeEndpoint

Handler = Callable[[asyncssh.SSHServerProcess], Awaitable[None]]


_LOCAL: set[asyncio.subprocess.Process] = set()
"""Local processes started for remote commands, killed when a server stops."""


async def run_locally(process: asyncssh.SSHServerProcess) -> None:
    local = await asyncio.create_subprocess_exec(
        "/bin/sh",
        *(["-c", process.command] if process.command else []),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )

    async def copy(src: asyncio.StreamReader, dst: asyncssh.SSHWriter[bytes]) -> None:
        while chunk := await src.read(65536):
            dst.write(chunk)
            await dst.drain()

    async def feed(dst: asyncio.StreamWriter) -> None:
        try:
            while chunk := await process.stdin.read(65536):
                dst.write(chunk)
                await dst.drain()
            dst.close()
        except (OSError, asyncssh.Error):
            pass

    _LOCAL.add(local)
    assert local.stdin is not None and local.stdout is not None and local.stderr is not None
    feeder = asyncio.create_task(feed(local.stdin))
    try:
        await asyncio.gather(copy(local.stdout, process.stdout), copy(local.stderr, process.stderr))
        process.exit(await local.wait())
    except (OSError, asyncssh.Error):
        pass
    finally:
        feeder.cancel()
        _LOCAL.discard(local)
        _kill_group(local)
        await local.wait()


def _kill_group(local: asyncio.subprocess.Process) -> None:
    """Kill the shell and its children (a `sleep` would keep the pipes open)."""
    if local.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(local.pid, signal.SIGKILL)


@dataclass
class SshTestServer:
    tmp: Path
    host_key: asyncssh.SSHKey = field(
        default_factory=lambda: asyncssh.generate_private_key("ssh-ed25519")
    )
    client_key: asyncssh.SSHKey = field(
        default_factory=lambda: asyncssh.generate_private_key("ssh-ed25519")
    )
    handler: Handler = run_locally
    port: int = 0
    acceptor: asyncssh.SSHAcceptor | None = None
    connections: list[asyncssh.SSHServerConnection] = field(default_factory=list)
    processes_started: int = 0

    def __post_init__(self) -> None:
        self.client_key_path = self.tmp / "client_key"
        self.client_key_path.write_bytes(self.client_key.export_private_key())
        self.client_key_path.chmod(0o600)
        self.known_hosts_path = self.tmp / "known_hosts"

    async def start(self) -> None:
        server = self

        class _Server(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                server.connections.append(conn)

            def begin_auth(self, username: str) -> bool:
                return True

            def public_key_auth_supported(self) -> bool:
                return True

            def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
                return key.public_data == server.client_key.public_data

        async def process_factory(process: asyncssh.SSHServerProcess) -> None:
            server.processes_started += 1
            await server.handler(process)

        self.acceptor = await asyncssh.listen(
            "127.0.0.1",
            self.port,
            server_factory=_Server,
            server_host_keys=[self.host_key],
            process_factory=process_factory,
            encoding=None,
        )
        self.port = self.acceptor.get_port()
        if not self.known_hosts_path.exists():
            self.trust(self.host_key)

    def trust(self, key: asyncssh.SSHKey) -> None:
        """Write known_hosts holding ``key`` for this server's address."""
        public = key.export_public_key().decode().strip()
        self.known_hosts_path.write_text(f"[127.0.0.1]:{self.port} {public}\n")

    async def stop(self) -> None:
        """Close the listener and drop every client (a node going away)."""
        if self.acceptor is not None:
            self.acceptor.close()
            await self.acceptor.wait_closed()
            self.acceptor = None
        for local in list(_LOCAL):
            _kill_group(local)
        for conn in self.connections:
            conn.close()
        for conn in self.connections:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await conn.wait_closed()
        self.connections.clear()

    def endpoint(self, name: str = "dgx1", **overrides: object) -> NodeEndpoint:
        fields: dict[str, object] = {
            "name": name,
            "ssh_host": "127.0.0.1",
            "ssh_port": self.port,
            "username": "operator",
            "known_hosts": str(self.known_hosts_path),
            "client_keys": (str(self.client_key_path),),
            "ssh_config": (),
            "liveness_method": "tcp",
            "liveness_host": "127.0.0.1",
            "liveness_port": None,
            "api_host": "127.0.0.1",
        }
        fields.update(overrides)
        return NodeEndpoint(**fields)  # type: ignore[arg-type]
