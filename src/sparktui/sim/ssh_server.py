"""A node's sshd: real SSH (asyncssh) on loopback, public-key auth, exec
channels and a long-lived `sh` reading commands on stdin.

A front listener accepts every TCP connection itself and hands it to asyncssh
only while the node is healthy: on a thrashing node the connection is
accepted but no banner is ever sent (sshd starved), as on the seeds' nights.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING

import asyncssh

from sparktui.core.probe import PROBE_TAG

from .commands import node_commands
from .shell import Command, Ctx, Shell, ShellEnv, ShellExit, incomplete

if TYPE_CHECKING:
    from .cluster import Sim
    from .node import Node

_SHELLS = {"sh", "/bin/sh", "bash", "/bin/bash", "sh -s", "bash -s", "exec sh"}
HANDSHAKE_TIMEOUT_S = 30.0


class _Coalesced:
    """A channel's stdout as the shell writes it, sent as one SSH data packet
    per turn of the event loop rather than one per ``echo`` (a real node's
    sshd reads the shell's pipe in chunks too). A write to a channel that is
    no longer open raises at once, as the channel's own write does."""

    def __init__(self, writer: asyncssh.SSHWriter[bytes]) -> None:
        self._writer = writer
        self._buf = bytearray()
        self._handle: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        self._writer.write(b"")  # BrokenPipeError once the channel is closed
        if not data:
            return
        self._buf += data
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._buf:
            data = bytes(self._buf)
            self._buf.clear()
            with contextlib.suppress(BrokenPipeError, ConnectionError, asyncssh.Error):
                self._writer.write(data)  # closed since: lost, as a real pipe's tail is

    async def drain(self) -> None:
        self.flush()
        await self._writer.drain()


class NodeSshd:
    def __init__(self, sim: Sim, node: Node, host_key: asyncssh.SSHKey,
                 authorized: asyncssh.SSHAuthorizedKeys) -> None:
        self.sim, self.node = sim, node
        self.port = 0
        self._options = asyncssh.SSHServerConnectionOptions(
            server_host_keys=[host_key], authorized_client_keys=authorized,
            process_factory=self._process, encoding=None, login_timeout=HANDSHAKE_TIMEOUT_S,
            server_version="OpenSSH_9.6p1 Ubuntu-3ubuntu13.14", allow_pty=True)
        self._listener: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._held: set[socket.socket] = set()
        self._conns: set[asyncssh.SSHServerConnection] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self._listener = sock
        self._accept_task = asyncio.create_task(self._accept_loop(sock))

    async def close(self) -> None:
        """Power loss: the listener, every session and every held connection go."""
        if self._accept_task is not None:
            self._accept_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accept_task
            self._accept_task = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for s in self._held:
            s.close()
        self._held.clear()
        for conn in list(self._conns):
            conn.abort()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._conns.clear()

    async def release_held(self) -> None:
        """The node recovered: the connections it accepted meanwhile get their banner."""
        held, self._held = self._held, set()
        for sock in held:
            self._spawn_serve(sock)

    def _spawn_serve(self, sock: socket.socket) -> None:
        task = asyncio.create_task(self._serve(sock))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept_loop(self, lsock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn_sock, _ = await loop.sock_accept(lsock)
            self.sim.sync()
            if not self.node.responsive:
                self._held.add(conn_sock)  # accepted, not answered while thrashing
                continue
            self._spawn_serve(conn_sock)

    async def _serve(self, sock: socket.socket) -> None:
        try:
            async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
                conn = await asyncssh.run_server(sock, options=self._options)
        except (OSError, asyncssh.Error, TimeoutError):
            sock.close()
            return
        self._conns.add(conn)
        try:
            await conn.wait_closed()
        finally:
            self._conns.discard(conn)

    async def _process(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command
        env = ShellEnv(commands=node_commands(self.sim, self.node), glob=self.node.fs.glob,
                       home=self.node.spec.home, read_file=self.node.fs.read,
                       before_command=lambda: self._responsive(process),
                       alive=lambda: not process.is_closing())
        env.commands = {**env.commands, "sh": self._nested(env)}
        out = _Coalesced(process.stdout)
        shell = Shell(env, out, process.stderr, process.stdin)
        status = 0
        try:
            if command is None or command.strip() in _SHELLS:
                status = await self._interactive(shell, process, out)
            else:
                status = await shell.run(command)
        except ShellExit as e:
            status = e.status
        except (BrokenPipeError, ConnectionError, asyncssh.Error):
            return
        except Exception as exc:  # a simulator bug: fail this command, keep the node
            self.sim.sched.errors.append((f"{self.node.name}: {command!r}", exc))
            out.flush()
            process.stderr.write(f"sh: 1: simulator error: {exc!r}\n".encode())
            status = 2
        with contextlib.suppress(Exception):
            await out.drain()
        process.exit(status)

    async def _interactive(self, shell: Shell, process: asyncssh.SSHServerProcess[bytes],
                           out: _Coalesced) -> int:
        """`sh` reading its script from stdin, line by line, keeping `$?`."""
        pending = ""
        probing = False
        while True:
            raw = await process.stdin.readline()
            if not raw:
                return shell.env.status
            pending += raw.decode(errors="replace")
            if incomplete(pending):
                continue
            if pending.startswith(PROBE_TAG):  # what a test counts: who polls this node
                self.node.probes += 1
                self.node.probe_shells += 0 if probing else 1
                probing = True
            await shell.run(pending)
            pending = ""
            with contextlib.suppress(Exception):
                await out.drain()

    def _nested(self, outer: ShellEnv) -> Command:
        """`sh -c SCRIPT`: a child shell with its own `$?` and line numbers.

        `sh -c WRAPPER sparktui-follow CMD` (adapters/ssh.FOLLOW_WRAPPER) is
        modelled, not interpreted: CMD runs until it ends or the channel's
        stdin reaches EOF, which is what the wrapper does on a real node
        (proved against OpenSSH in tests/adapters/test_follow_openssh.py)."""

        async def sh(ctx: Ctx) -> int:
            if len(ctx.argv) < 3 or ctx.argv[1] != "-c":
                ctx.err("sh: 0: only `sh -c SCRIPT` is supported here\n")
                return 2
            if ctx.argv[3:4] == ["sparktui-follow"] and len(ctx.argv) == 5:
                eof = asyncio.Event()

                async def watch_stdin() -> None:
                    while ctx.stdin is not None and await ctx.stdin.read(4096):
                        pass
                    eof.set()
                    self.sim.notify()

                watcher = asyncio.create_task(watch_stdin())

                def alive() -> bool:
                    return outer.alive() and not eof.is_set()

                env = ShellEnv(commands=outer.commands, glob=outer.glob, home=outer.home,
                               read_file=outer.read_file,
                               before_command=outer.before_command, alive=alive)
                try:
                    return await Shell(env, ctx.out_sink, ctx.err_sink, None).run(ctx.argv[4])
                except ShellExit as e:
                    return e.status
                finally:
                    watcher.cancel()
            env = ShellEnv(commands=outer.commands, glob=outer.glob, home=outer.home,
                           read_file=outer.read_file,
                           before_command=outer.before_command, alive=outer.alive)
            try:
                return await Shell(env, ctx.out_sink, ctx.err_sink, ctx.stdin).run(ctx.argv[2])
            except ShellExit as e:
                return e.status

        return sh

    async def _responsive(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        """Stall while the node thrashes; give up when the client has gone."""
        while not self.node.responsive:
            if process.is_closing():
                raise ConnectionError("client gone")
            await self.sim.wait_change(timeout=1.0)
            self.sim.sync()
