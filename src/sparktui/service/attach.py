"""A console attached to a running sentinel: one poller per cluster, however
many consoles are open (issue 17).

The sentinel serves its event stream on ``<state_dir>/sentinel.sock``, a Unix
socket of mode 0600 (the cluster's state is its owner's alone): every service
event it reports (node snapshots, lane changes, log lines of the ranks it
follows, alerts) as one JSON line in the recording's encoding
(`service.recording.encode`). A console that connects first gets what the
sentinel holds of the night so far (`StreamState.story`: the alerts in the
order they came, recent samples of every node, the lanes, the log buffers),
then the live stream. Actions still run in the console's own process.

One JSON object a line, ``"k"`` says which::

    hello   {"k": "hello", "v": 1, "pid": N, "since": EPOCH}   first; a replay follows
    event   {"k": "event", "t": EPOCH, "e": EVENT}             one service event
    live    {"k": "live"}                                      the replay is complete
    beat    {"k": "beat", "t": EPOCH}                          every BEAT_S: it lives
    resync  {"k": "resync", "why": TEXT}                       you fell behind: your queue
                                                               was dropped, a replay follows
    bye     {"k": "bye", "why": TEXT}                          the sentinel stops

The socket is a subscription, not a command channel: a console sends
nothing, and whatever a client writes is read and dropped unparsed (logged
once per client), so no client can mark a lane stopping, write into the
night's recording or reach the phone. The sentinel learns a console's stop
from the journal's stop intents (ops/stop_intents.py), and records and phones
the workflows any process runs from the journal's entries
(ops/journal_tail.py `JournalWorkflows`).

A slow console never stalls the sentinel: `SentinelHub.publish` only appends
to each client's bounded queue; a queue that overflows is dropped and the
client told to resync; a client that takes no bytes for WRITE_TIMEOUT_S is
disconnected. A console that hears nothing for LOST_AFTER_S (three beats)
takes the sentinel for dead, says so (alert ``sentinel:lost``), watches alone
and tries to attach again (`reattach`: after REATTACH_FIRST_S, doubling to
REATTACH_MAX_S, on the service's clock); once a sentinel answers, its own
watch stops, the new replay is shown, and what the replay no longer holds
(its own lanes and alerts, the lost alert) is said gone and cleared: the
lost alert's clearing is the console's "re-attached".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparktui.core.advice import SENTINEL_DOWN_NEXT
from sparktui.core.clock import Clock, within
from sparktui.service.codec import decode, encode
from sparktui.service.events import (
    Alert,
    AlertCleared,
    LaneGone,
    ServiceEvent,
    Sink,
)
from sparktui.service.stream import StreamState

log = logging.getLogger(__name__)

SOCKET_NAME = "sentinel.sock"
WIRE_VERSION = 1
BEAT_S = 5.0
LOST_AFTER_S = 3 * BEAT_S
CONNECT_TIMEOUT_S = 2.0
"""Connecting and reading the hello (a local socket: a sentinel that takes
longer is wedged, and the console then watches alone)."""
WRITE_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 2.0
CLIENT_QUEUE_LINES = 10_000
"""Lines a console may fall behind by (past its replay) before it is resynced."""
DRAIN_CHUNK = 2**16
"""Bytes a client's input is read (and dropped) by."""
LINE_LIMIT = 32 * 2**20
"""Longest line read: a replayed rank's log buffer is one line."""
REPLAY_SAMPLES = 150
"""Recent samples per node replayed to a console (5 minutes at 2 s): its memory graph."""

REATTACH_FIRST_S = 2.0
REATTACH_MAX_S = 60.0
"""A console watching alone first tries to attach again REATTACH_FIRST_S after
the loss, then waits twice as long each time, up to REATTACH_MAX_S (systemd
restarts a dead sentinel after 15 s: it is back within a minute)."""
LOST_KEY = "sentinel:lost"


def socket_path(state_dir: Path) -> Path:
    return state_dir / SOCKET_NAME


def _line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg, separators=(",", ":"), default=str).encode() + b"\n"


def _event_line(t: float, ev: ServiceEvent) -> bytes:
    """One event on the wire, live or replayed: the recording's encoding."""
    return _line({"k": "event", "t": t, "e": encode(ev)})


# -- the sentinel's side --------------------------------------------------------


class _Client:
    """One attached console: its bounded queue and the task that writes it."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.queue: deque[bytes] = deque()
        self.ready = asyncio.Event()
        self.cap = CLIENT_QUEUE_LINES
        self.closing = False

    def offer(self, line: bytes) -> bool:
        """Queue a line; False when the queue is full (the client is behind)."""
        if len(self.queue) >= self.cap:
            return False
        self.queue.append(line)
        self.ready.set()
        return True

    def reset(self, lines: list[bytes], limit: int) -> None:
        self.queue.clear()
        self.queue.extend(lines)
        self.cap = len(lines) + limit
        self.ready.set()


class SentinelHub:
    """The sentinel's socket: every event it reports, to every attached console."""

    def __init__(self, path: Path, *, clock: Clock, pid: int,
                 queue_lines: int = CLIENT_QUEUE_LINES) -> None:
        self.path = path
        self.clock = clock
        self.pid = pid
        self.queue_lines = queue_lines
        self.state = StreamState()
        self.since = 0.0
        self.resyncs = 0
        """Consoles told to resync (their queue overflowed)."""
        self._clients: dict[asyncio.Task[None], _Client] = {}
        self._server: asyncio.AbstractServer | None = None
        self._beat: asyncio.Task[None] | None = None

    @property
    def clients(self) -> int:
        return len(self._clients)

    async def start(self) -> None:
        """Listen; a socket left at ``path`` is a dead sentinel's (the caller
        holds the pid lock), so it is replaced."""
        self.since = self.clock.time()
        self.path.unlink(missing_ok=True)
        old = os.umask(0o177)  # created 0600: no moment where others may connect
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._beat = asyncio.create_task(self._beats(), name="sentinel:beats")

    def publish(self, ev: ServiceEvent) -> None:
        """Synchronous and bounded: never waits for a console."""
        t = self.clock.time()
        self.state.fold(t, ev)
        if self._clients:
            self._broadcast(_event_line(t, ev))

    def _broadcast(self, line: bytes) -> None:
        for client in self._clients.values():
            if not client.closing and not client.offer(line):
                self.resyncs += 1
                log.warning("a console fell %d lines behind: resynced", len(client.queue))
                client.reset([_line({"k": "resync", "why": "fell behind the stream"}),
                              *self._replay()], self.queue_lines)

    def _replay(self) -> list[bytes]:
        hello = {"k": "hello", "v": WIRE_VERSION, "pid": self.pid, "since": self.since}
        return [_line(hello),
                *(_event_line(t, ev) for t, ev in self.state.story(REPLAY_SAMPLES)),
                _line({"k": "live"})]

    async def _beats(self) -> None:
        while True:
            await self.clock.sleep(BEAT_S)
            self._broadcast(_line({"k": "beat", "t": self.clock.time()}))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        client = self._clients[task] = _Client(writer)
        client.reset(self._replay(), self.queue_lines)
        # what the client writes is drained and dropped; lives as long as the connection
        listening = asyncio.create_task(self._drain(reader), name="sentinel:client-input")
        try:
            while not (client.closing and not client.queue):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2 * BEAT_S):
                        await client.ready.wait()
                client.ready.clear()
                while client.queue:
                    chunk = [client.queue.popleft() for _ in range(min(256, len(client.queue)))]
                    writer.write(b"".join(chunk))
                    async with asyncio.timeout(WRITE_TIMEOUT_S):
                        await writer.drain()
        except TimeoutError:
            log.warning("a console took nothing for %g s: disconnected", WRITE_TIMEOUT_S)
        except ConnectionError:
            pass  # the console closed
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)
            self._clients.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await writer.wait_closed()

    @staticmethod
    async def _drain(reader: asyncio.StreamReader) -> None:
        """Read and drop what a client sends (never parsed): the subscription
        goes on whatever it writes; said once per client."""
        said = False
        while data := await reader.read(DRAIN_CHUNK):
            if not said:
                said = True
                log.warning("a client of the sentinel's socket wrote %r...: ignored (the "
                            "socket is a subscription; nothing a client sends is read)",
                            data[:40])

    async def close(self, why: str = "the sentinel stops") -> None:
        """Say goodbye to every console (bounded), stop listening, remove the socket."""
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.gather(self._beat, return_exceptions=True)
        if self._server is not None:
            self._server.close()
        bye = _line({"k": "bye", "why": why})
        for client in self._clients.values():
            client.queue.append(bye)
            client.closing = True
            client.ready.set()
        tasks = list(self._clients)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S)
            for t in late:
                t.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(OSError):
            self.path.unlink()


# -- the console's side -----------------------------------------------------------


class SentinelFeed:
    """One console's connection to the sentinel (`attach` makes it)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 pid: int, since: float, clock: Clock) -> None:
        self._reader = reader
        self._writer = writer
        self.pid = pid
        self.since = since
        self.clock = clock
        self.state = StreamState()

    @classmethod
    async def attach(cls, path: Path, clock: Clock, *,
                     retry: bool = False) -> SentinelFeed | None:
        """The running sentinel's stream, or None when none answers at ``path``
        (said in the log at info level, at debug level for a ``retry``)."""
        if not path.exists():
            return None
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                reader, writer = await asyncio.open_unix_connection(str(path),
                                                                    limit=LINE_LIMIT)
                hello = json.loads(await reader.readline())
            if hello.get("k") != "hello" or hello.get("v") != WIRE_VERSION:
                raise ValueError(f"not a sentinel's hello: {str(hello)[:80]}")
            return cls(reader, writer, pid=int(hello["pid"]), since=float(hello["since"]),
                       clock=clock)
        except (OSError, TimeoutError, ValueError, KeyError, TypeError) as exc:
            log.log(logging.DEBUG if retry else logging.INFO,
                    "no sentinel to attach to at %s: %r", path, exc)
            if writer is not None:
                writer.close()
            return None

    async def follow(self, emit: Sink, shown: tuple[set[str], set[str]] | None = None) -> str:
        """Apply and report every event until the stream ends; returns why it
        ended. After a resync, or the first replay when ``shown`` (the lanes
        and alert keys a re-attaching console shows), the lanes and alerts the
        replay does not hold are reported gone and cleared."""
        before = shown
        while True:
            try:
                raw = await within(self.clock, LOST_AFTER_S, self._reader.readline())
            except TimeoutError:
                return f"sent nothing for {LOST_AFTER_S:g} s"
            except (OSError, ValueError) as exc:  # ValueError: a line past LINE_LIMIT
                return f"its stream broke ({exc})"
            if not raw:
                return "closed its socket"
            try:
                msg = json.loads(raw)
                kind = msg.get("k")
                if kind == "event":
                    t, ev = float(msg["t"]), decode(msg["e"])
                    self.state.fold(t, ev)
                    emit(ev)
                elif kind == "resync":
                    log.warning("the sentinel resynced this console: %s", msg.get("why"))
                    before = (set(self.state.lanes), set(self.state.alerts))
                    self.state = StreamState()
                elif kind == "live" and before is not None:
                    for lane in sorted(before[0] - set(self.state.lanes)):
                        emit(LaneGone(lane))
                    for key in sorted(before[1] - set(self.state.alerts)):
                        emit(AlertCleared(key))
                    before = None
                elif kind == "bye":
                    return f"stopped ({msg.get('why', '')})"
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                log.warning("a line from the sentinel skipped: %r", exc)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self._writer.wait_closed()


async def reattach(path: Path, clock: Clock, ready: Callable[[], bool]) -> SentinelFeed:
    """A sentinel's stream at ``path`` once one answers again: tried after
    REATTACH_FIRST_S, then twice as long each time up to REATTACH_MAX_S (on
    ``clock``), each try bounded by CONNECT_TIMEOUT_S; while not ``ready()``
    nothing is tried (asked every REATTACH_FIRST_S). Cancel to give up."""
    delay = REATTACH_FIRST_S
    while True:
        await clock.sleep(delay)
        if not ready():
            delay = REATTACH_FIRST_S
            continue
        if (feed := await SentinelFeed.attach(path, clock, retry=True)) is not None:
            return feed
        delay = min(2 * delay, REATTACH_MAX_S)


def lost_alert(pid: int | None, why: str, *, polls: bool = True) -> Alert:
    """The console lost its sentinel (``pid`` None: none answered at the start).
    ``polls``: it watches alone meanwhile; else (``--attached-only``, each web
    session) it shows the sentinel's last state, marked stale, and only waits."""
    who = f"the sentinel (pid {pid})" if pid is not None else "no sentinel"
    if polls:
        said = f"{who} {why}: this console now polls the nodes itself"
    else:
        said = (f"sentinel lost, re-attaching…: {who} {why}; shown is the last it sent, "
                "marked stale (this console never polls the nodes itself)")
    return Alert(LOST_KEY, "sentinel lost", "sentinel", (said,),
                 f"{SENTINEL_DOWN_NEXT}; this console attaches to it again by itself")
