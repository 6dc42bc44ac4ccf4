"""One persistent SSH connection per node (asyncssh).

Why a long-lived shell for polling: sshd spends ~100 ms setting up each new
exec channel, so an exec per poll costs ~900 ms per round for 8 nodes, while
one `sh` per node fed the probe on stdin and read back up to a unique sentinel
costs ~14 ms (issue 4; see BENCHMARKS.md). One-off commands (`run`) and log
tails (`stream`) still get their own channel on the same connection.

Host keys are always verified against a known_hosts file; nothing here can
turn that off. The connection reconnects on demand, no more often than an
exponential backoff allows, so a dead node costs one fast error per poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import shlex
from collections.abc import AsyncGenerator, AsyncIterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from sparktui.adapters.endpoints import Endpoints, NodeEndpoint
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config, SshConfig
from sparktui.core.errors import RemoteError

SENTINEL = "@@sparktui-done"
_SENTINEL_LINE = re.compile(rf"{SENTINEL} (?P<nonce>[0-9a-f]+) (?P<status>\d+)\n")
PROBE = "probe"
READ = "read"
"""The two long-lived shells of a node: the poller's probe, the watchers' reads."""
FOLLOW_TAG = "sparktui-follow"
FOLLOW_WRAPPER = ('exec 3<&0 </dev/null; { cat <&3 >/dev/null 2>&1; kill 0; } & exec 3<&-; '
                  'eval "$1"; kill 0')
"""POSIX sh around every streamed command: the command runs in the foreground
(stdin from /dev/null) while a watcher reads the channel's stdin; when the
channel closes, stdin reaches EOF and the watcher ends the whole process
group (sshd starts each session in its own). Closing the channel alone does
not end a silent ``docker logs -f``: OpenSSH refuses signal requests for root
sessions ("session signalling requires privilege separation"), and a process
that writes nothing never meets SIGPIPE. When the command ends by itself,
the wrapper ends the watcher the same way."""
CLOSE_TIMEOUT_S = 2.0
"""How long to wait for a channel to close after we asked it to."""
STREAM_CHUNK = 65536
PREFERRED_CIPHERS = [
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
]
"""asyncssh's default ciphers with AES-GCM first: a probe arrives as dozens of
small packets, and asyncssh's ChaCha20-Poly1305 builds three cipher contexts
per packet, which doubled the client CPU of a poll round (BENCHMARKS.md).
AES-GCM is as strong and hardware-accelerated on x86 and on GB10's ARM cores."""


class HostKeyError(RemoteError):
    """The node's host key is missing from, or differs from, known_hosts.

    Never retried silently: it is either a reinstalled node or an attack, and
    the operator must decide. ``kind`` is ``changed``, ``unknown`` or
    ``no_known_hosts`` (the file itself is missing).
    """

    def __init__(self, node: str, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(node, "connect", message)


class AuthError(RemoteError):
    """sshd answered but refused our keys: a configuration problem, not thrash."""


class ProbeStalled(RemoteError):
    """The long-lived shell did not answer the probe within its timeout.

    The shell has been torn down (a fresh one is opened by the next probe).
    For the thrash detector this is evidence (sshd or the node is starved),
    not a crash.
    """


class LoginStalled(RemoteError):
    """Connecting, logging in or starting the login shell did not finish
    within the whole login budget (``connect_timeout_s``, several times a
    slow ``.bashrc``): with liveness answering, a starved node, like a
    stalled probe. A refused connection is not this (it fails at once)."""


@dataclass(frozen=True)
class CommandResult:
    exit_status: int | None
    """None when the remote process ended on a signal or without a status."""
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class NodeConnection:
    """The SSH connection to one node, opened on first use and re-opened on
    demand after a failure (backoff: 1, 2, 4 ... up to ``backoff_max_s``)."""

    def __init__(
        self,
        endpoint: NodeEndpoint,
        ssh: SshConfig,
        *,
        clock: Clock | None = None,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 16.0,
    ) -> None:
        self.endpoint = endpoint
        self._ssh = ssh
        self._clock = clock or SystemClock()
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._conn: asyncssh.SSHClientConnection | None = None
        self._shells: dict[str, asyncssh.SSHClientProcess[str]] = {}
        """The long-lived ``sh`` of the probe and the one of short reads."""
        self._connect_lock = asyncio.Lock()
        self._locks = {PROBE: asyncio.Lock(), READ: asyncio.Lock()}
        self._failures = 0
        self._retry_at = 0.0
        self._last_error: RemoteError | None = None
        self.connects = 0
        """How many connections were opened (reconnects included)."""

    @property
    def name(self) -> str:
        return self.endpoint.name

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    # -- connection ----------------------------------------------------------

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The open connection, connecting (or reconnecting) if needed."""
        async with self._connect_lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            self._drop()
            now = self._clock.monotonic()
            if now < self._retry_at and self._last_error is not None:
                raise self._backoff_error(self._last_error, self._retry_at - now)
            try:
                conn = await self._open()
            except BaseException as exc:
                error = exc if isinstance(exc, RemoteError) else self._connect_error(exc)
                self._failures += 1
                # the exponent is capped: a night of refusals must not overflow
                delay = self._backoff_initial_s * 2 ** min(self._failures - 1, 20)
                self._retry_at = self._clock.monotonic() + min(delay, self._backoff_max_s)
                self._last_error = error
                if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                    raise
                if _cancel_pending():
                    raise asyncio.CancelledError from None
                raise error from None
            self._failures = 0
            self._retry_at = 0.0
            self._last_error = None
            self._conn = conn
            self.connects += 1
            return conn

    def _backoff_error(self, last: RemoteError, wait_s: float) -> RemoteError:
        """The last connect error again, saying when the next attempt is due."""
        if isinstance(last, HostKeyError):
            return last
        message = f"{last.message} (next attempt in {wait_s:.1f} s)"
        return type(last)(self.name, "connect", message)

    async def _open(self) -> asyncssh.SSHClientConnection:
        ep = self.endpoint
        known_hosts = Path(ep.known_hosts)
        if not known_hosts.is_file():
            raise HostKeyError(
                self.name,
                "no_known_hosts",
                f"known_hosts file {known_hosts} does not exist; host keys are always "
                "verified, so create it with the node's verified key "
                "(ssh-keyscan, then compare the fingerprint) or set [ssh] known_hosts",
            )
        options: dict[str, object] = {
            "username": ep.username,
            "known_hosts": str(known_hosts),
            "connect_timeout": self._ssh.connect_timeout_s,
            "login_timeout": self._ssh.connect_timeout_s,
            "keepalive_interval": self._ssh.keepalive_interval_s,
            "keepalive_count_max": self._ssh.keepalive_count_max,
            "encryption_algs": PREFERRED_CIPHERS,
        }
        if ep.client_keys:
            options["client_keys"] = list(ep.client_keys)
        config: list[str] | None = [p for p in ep.ssh_config if Path(p).is_file()] or None
        try:
            async with asyncio.timeout(self._ssh.connect_timeout_s + 1.0):
                return await asyncssh.connect(ep.ssh_host, ep.ssh_port, config=config, **options)
        except asyncssh.HostKeyNotVerifiable:
            raise await self._host_key_error() from None

    def _connect_error(self, exc: BaseException) -> RemoteError:
        where = f"{self.endpoint.username}@{self.endpoint.ssh_host}:{self.endpoint.ssh_port}"
        if isinstance(exc, asyncssh.PermissionDenied):
            return AuthError(self.name, "connect", f"{where}: authentication refused: {exc}")
        if isinstance(exc, TimeoutError | asyncio.CancelledError):
            return LoginStalled(self.name, "connect", f"{where}: connect timed out")
        return RemoteError(self.name, "connect", f"{where}: {type(exc).__name__}: {exc}")

    async def _host_key_error(self) -> HostKeyError:
        ep = self.endpoint
        entry = ep.ssh_host if ep.ssh_port == 22 else f"[{ep.ssh_host}]:{ep.ssh_port}"
        try:
            trusted = asyncssh.read_known_hosts(ep.known_hosts).match(
                ep.ssh_host, ep.ssh_host, ep.ssh_port
            )[0]
        except (OSError, ValueError, asyncssh.Error):
            trusted = ()
        offered = ""
        try:
            async with asyncio.timeout(self._ssh.connect_timeout_s):
                key = await asyncssh.get_server_host_key(ep.ssh_host, ep.ssh_port)
            if key is not None:
                offered = f" (offered {key.get_algorithm()} {key.get_fingerprint()})"
        except (OSError, TimeoutError, asyncssh.Error):
            pass
        if trusted:
            return HostKeyError(
                self.name,
                "changed",
                f"HOST KEY CHANGED for {entry}{offered}: it does not match the key in "
                f"{ep.known_hosts}. The node was reinstalled or someone is in the middle; "
                f"verify the new fingerprint on the console, then `ssh-keygen -R '{entry}' "
                f"-f {ep.known_hosts}` and add the new key",
            )
        return HostKeyError(
            self.name,
            "unknown",
            f"no host key for {entry} in {ep.known_hosts}{offered}; verify the "
            "fingerprint on the node, then add it (`ssh-keyscan`) — sparktui never "
            "accepts an unknown key",
        )

    def _drop(self) -> None:
        """Forget a closed connection and the shells that lived on it."""
        for slot in list(self._shells):
            self._discard_shell(slot)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _transport_error(self, cmd: str, exc: BaseException) -> RemoteError:
        """Any transport failure closes the connection: the next call reconnects
        (asyncssh may not have marked a dying connection closed yet)."""
        self._drop()
        return RemoteError(self.name, cmd, f"{type(exc).__name__}: {exc}")

    # -- one-off commands ----------------------------------------------------

    async def run(self, cmd: str, timeout: float) -> CommandResult:
        """Run ``cmd`` on its own channel; ``timeout`` bounds the connect (if
        one is needed) and the command together."""
        try:
            async with asyncio.timeout(timeout):
                conn = await self.connection()
                async with conn.create_process(
                    cmd, errors="replace", stdin=asyncssh.DEVNULL
                ) as proc:
                    done = await proc.wait()
        except RemoteError:
            raise
        except TimeoutError:
            raise RemoteError(self.name, cmd, f"timed out after {timeout:g} s") from None
        except (OSError, asyncssh.Error, asyncio.IncompleteReadError) as exc:
            raise self._transport_error(cmd, exc) from None
        return CommandResult(done.exit_status, str(done.stdout or ""), str(done.stderr or ""))

    async def run_with_input(self, cmd: str, chunks: AsyncIterable[bytes],
                             timeout: float) -> CommandResult:
        """Run ``cmd`` on its own channel with its stdin fed from ``chunks``, then
        EOF (``docker load`` fed from another node's ``docker save``). Output is
        stdout and stderr merged; ``timeout`` bounds the whole transfer. An error
        raised by ``chunks`` (the source side) propagates unchanged."""
        try:
            async with asyncio.timeout(timeout):
                conn = await self.connection()
                async with conn.create_process(cmd, encoding=None,
                                               stderr=asyncssh.STDOUT) as proc:
                    async for chunk in chunks:
                        proc.stdin.write(chunk)
                        await proc.stdin.drain()
                    proc.stdin.write_eof()
                    done = await proc.wait()
        except RemoteError:
            raise
        except TimeoutError:
            raise RemoteError(self.name, cmd, f"timed out after {timeout:g} s") from None
        except (OSError, asyncssh.Error, asyncio.IncompleteReadError) as exc:
            raise self._transport_error(cmd, exc) from None
        out = done.stdout.decode(errors="replace") if isinstance(done.stdout, bytes) else ""
        return CommandResult(done.exit_status, out, "")

    async def stream(self, cmd: str) -> AsyncGenerator[bytes, None]:
        """Raw stdout chunks of ``cmd`` until it exits (merge stderr with
        ``2>&1`` in ``cmd``). Cancelling the consumer or calling ``aclose()``
        closes the channel and the remote command ends with it, for any login
        user (it runs under :data:`FOLLOW_WRAPPER`).

        Reads have no timeout on purpose: a followed log can be silent for
        minutes. The caller owns the iteration and cancels it; a dead
        connection ends it through the keepalive."""
        try:
            async with asyncio.timeout(self._ssh.connect_timeout_s + 1.0):
                conn = await self.connection()
                proc = await conn.create_process(follow_command(cmd), encoding=None)
        except RemoteError:
            raise
        except TimeoutError:
            raise RemoteError(self.name, cmd, "channel open timed out") from None
        except (OSError, asyncssh.Error) as exc:
            raise self._transport_error(cmd, exc) from None
        try:
            while True:
                try:
                    chunk = await proc.stdout.read(STREAM_CHUNK)
                except (OSError, asyncssh.Error) as exc:
                    raise self._transport_error(cmd, exc) from None
                if not chunk:
                    return
                yield chunk
        finally:
            await _close_process(proc, terminate=proc.exit_status is None)

    # -- the probe over the long-lived shell ---------------------------------

    async def probe(self, script: str, timeout: float) -> str:
        """Run ``script`` in the node's long-lived ``sh`` and return its output.

        ``timeout`` is the script's budget on a shell that already answered:
        connecting, logging in and the login shell's start (a slow ``.bashrc``)
        are bounded by ``connect_timeout_s`` instead and fail as "connect"
        errors. Raises ProbeStalled only when a working shell does not answer
        within ``timeout`` (it is torn down; the next call opens a new one),
        RemoteError when the node cannot be reached or the shell died.
        """
        try:
            out, _ = await self._in_shell(PROBE, script, timeout)
        except TimeoutError:
            raise ProbeStalled(
                self.name, "probe", f"shell did not answer within {timeout:g} s"
            ) from None
        return out

    async def read(self, cmd: str, timeout: float) -> CommandResult:
        """Run a short command that only reads and ends by itself (a catch-up
        ``docker logs --since``) in the node's long-lived reader ``sh``: no
        channel and no login per call (an exec channel is a session setup on
        sshd, ~0.2 s on a loaded host), apart from the probe's shell so the
        poller never waits for it. Output is stdout and stderr merged."""
        try:
            out, status = await self._in_shell(READ, cmd, timeout)
        except TimeoutError:
            raise RemoteError(self.name, cmd, f"timed out after {timeout:g} s") from None
        return CommandResult(status, out, "")

    async def open_reader(self) -> None:
        """Open the reader shell now, ahead of the first :meth:`read`: a lane
        watcher does so at its start, so a fatal line never waits for a
        session setup (connect, login, the login shell's start)."""
        async with self._locks[READ]:
            await self._working_shell(READ)

    async def _in_shell(self, slot: str, script: str, timeout: float) -> tuple[str, int]:
        """``script`` in the ``slot`` shell: its output and exit status. On a
        timeout (TimeoutError) or a transport error the shell is torn down
        (the next call opens a new one)."""
        async with self._locks[slot]:
            shell = await self._working_shell(slot)
            nonce = secrets.token_hex(8)
            try:
                async with asyncio.timeout(timeout):
                    shell.stdin.write(f'{script}\necho "{SENTINEL} {nonce} $?"\n')
                    return await _read_to_sentinel(shell, nonce)
            except TimeoutError:
                self._discard_shell(slot)
                raise
            except (OSError, asyncssh.Error, asyncio.IncompleteReadError) as exc:
                self._discard_shell(slot)
                raise self._transport_error(slot, exc) from None

    async def _working_shell(self, slot: str) -> asyncssh.SSHClientProcess[str]:
        """The long-lived shell, opened if needed and proven to answer (one
        ``echo``) within ``connect_timeout_s``. A fresh shell that does not
        answer drops the connection too: it is suspect (dead peer, starved
        sshd), so the next probe starts on a new one."""
        if (live := self._shells.get(slot)) is not None and not live.is_closing():
            return live
        self._discard_shell(slot)
        conn = await self.connection()
        budget = self._ssh.connect_timeout_s
        shell: asyncssh.SSHClientProcess[str] | None = None
        try:
            async with asyncio.timeout(budget):
                shell = await conn.create_process("sh", errors="replace",
                                                  stderr=asyncssh.STDOUT)
                nonce = secrets.token_hex(8)
                shell.stdin.write(f'echo "{SENTINEL} {nonce} 0"\n')
                await _read_to_sentinel(shell, nonce)
        except BaseException as exc:
            if shell is not None:
                shell.close()
            if isinstance(exc, TimeoutError):
                self._drop()
                raise LoginStalled(self.name, "connect", "the login shell did not start "
                                   f"within {budget:g} s") from None
            if isinstance(exc, OSError | asyncssh.Error | asyncio.IncompleteReadError):
                raise self._transport_error("shell", exc) from None
            raise
        self._shells[slot] = shell
        return shell

    def _discard_shell(self, slot: str) -> None:
        if (shell := self._shells.pop(slot, None)) is not None:
            shell.close()

    async def close(self) -> None:
        for slot in list(self._shells):
            self._discard_shell(slot)
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await conn.wait_closed()
            except TimeoutError:
                pass


def follow_command(cmd: str) -> str:
    """``cmd`` under the follow wrapper, quoted for the remote shell."""
    return f"sh -c {shlex.quote(FOLLOW_WRAPPER)} {FOLLOW_TAG} {shlex.quote(cmd)}"


async def _read_to_sentinel(shell: asyncssh.SSHClientProcess[str], nonce: str
                            ) -> tuple[str, int]:
    """The shell's output up to (without) the ``SENTINEL nonce status`` line,
    and that status. One pattern for every nonce, compiled once: a pattern
    per call (the nonce in it) was compiled afresh every probe and read."""
    out = ""
    while True:
        chunk = await shell.stdout.readuntil(_SENTINEL_LINE, max_separator_len=64)
        end = _SENTINEL_LINE.search(chunk)  # the first match is the one it ends with
        assert end is not None  # readuntil returned through a match
        if end["nonce"] == nonce:  # another nonce's line is output like any other
            return out + chunk[:end.start()], int(end["status"])
        out += chunk


def _cancel_pending() -> bool:
    """Was this task asked to stop while its connect failed? asyncssh bounds
    a connect with ``asyncio.wait_for``, which on Python 3.11 drops a
    cancellation that arrives as the connect fails (CPython gh-86296): the
    caller would see the failure and, in a retry loop (a log follower of a
    node that just lost power), retry for ever, its owner waiting on it."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _close_process(proc: asyncssh.SSHClientProcess[bytes], *, terminate: bool) -> None:
    with contextlib.suppress(OSError, asyncssh.Error):
        proc.stdin.write_eof()  # the wrapper's cue, even before the channel closes
    if terminate:
        with contextlib.suppress(OSError, asyncssh.Error):
            proc.terminate()
    proc.close()
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await proc.wait_closed()
    except (TimeoutError, OSError, asyncssh.Error):
        pass


class Fleet:
    """One NodeConnection per configured node; closing the fleet closes them all."""

    def __init__(self, connections: Mapping[str, NodeConnection]) -> None:
        self._connections = dict(connections)

    @classmethod
    def from_config(
        cls, config: Config, endpoints: Endpoints, *, clock: Clock | None = None
    ) -> Fleet:
        return cls(
            {
                name: NodeConnection(endpoints.node(name), config.ssh, clock=clock)
                for name in config.nodes
            }
        )

    def get(self, name: str) -> NodeConnection:
        return self._connections[name]

    def __iter__(self) -> Iterator[NodeConnection]:
        return iter(self._connections.values())

    def __len__(self) -> int:
        return len(self._connections)

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._connections.values()))

    async def __aenter__(self) -> Fleet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
