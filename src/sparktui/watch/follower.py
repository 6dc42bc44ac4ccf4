"""Follow a rank container's log (or a node's kernel journal) over the
node's persistent SSH connection.

``docker logs [-f] [--tail N | --since TS] --timestamps NAME 2>&1`` and
``journalctl -b -f -o short-iso-precise --no-pager [-n N] MATCHES`` (the commands of
docs/CONTRACTS.md) are streamed as raw bytes; this module turns the chunks
into lines:

- partial lines are held until their newline; a line longer than
  ``max_line_bytes`` is cut there (the rest up to the newline is dropped), so
  no buffer grows without bound, except a line of tqdm redraws (``\\r``),
  which keeps its latest redraws (what a terminal shows) instead;
- docker's pieces of a long line are joined (see below); a held line's
  latest complete redraw is delivered ahead of its newline as an
  :class:`OpenLine` (container logs only);
- bytes are decoded per line with ``errors="replace"`` (invalid UTF-8 or a
  multi-byte character split across chunks never raises);
- when the stream drops while the container still runs, the follower
  reconnects with ``--since <last timestamp>`` (the journal: ``-n 500``) and
  skips what it already delivered (docker's ``--since`` is inclusive), so
  there is no duplicate and no gap; reconnects back off 1, 2, 4 ... 16 s on
  the injected clock;
- a stream that ends is not proof the log was read to its end: the channel
  may have been closed under it (a stalled probe drops the connection) while
  the engine wrote its last lines and the container exited. So the follow
  ends only after one more read from the last timestamp once the container
  stopped (the console once missed an EngineDead that way);
- :meth:`LogFollower.catch_up` reads, without following, what the log holds
  beyond the last delivered line (one-shot ``docker logs --since``): the lane
  watcher uses it to know a rank's log is read up to "now" before it decides
  which rank failed first.

Lines are delivered in batches (one per chunk) to keep ingest fast.

What ``docker logs --timestamps`` prints of a line that has no newline yet
(moby, read in its source; docs/DIALECTS.md "What docker prints of a bar"):
the log copier (``daemon/logger/copier.go``, ``copySrc``) reads the
container's stdout and stderr (one copier each) into a 16 KiB buffer
(``defaultBufSize = 16 * 1024``) and logs one message per ``\\n``; only when
the buffer is full with no ``\\n`` in it does it log those 16 KiB as a
*partial* message, and every piece of that line, the last (ended by the
``\\n``) included, carries the first piece's timestamp (``partialTS``). The
json-file and local drivers store the pieces without a newline (jsonfilelog
``marshalMessage``, local ``decodeLogEntry``: ``\\n`` only when not partial or
the last), and ``docker logs`` writes every message with its own timestamp
prefix (api/server/httputils/write_log_stream.go ``WriteLogStream``). So:

- a tqdm bar shorter than 16 KiB (SGLang's shard bar, ~90 bytes a redraw:
  under ~180 shards) prints nothing until it closes, then one line
  ``TS \\rredraw\\r...\\rlast\\n``; nothing can be read of it sooner;
- a longer one prints ``TS <16 KiB>`` as each piece fills, then
  ``TS <16 KiB>`` again (the same TS, no newline between them) ... and the
  rest with the newline: one physical line with the stamp repeated every
  16 KiB (docker/cli#4941, moby/moby#37681, both open). The follower drops
  the repeated stamps (:func:`_joined`): one line, one stamp, so ``--since``
  (inclusive: a resume gets every piece again) and the skip count work on
  whole lines. A piece held when a stream drops is not a line: it is read
  again, whole, on the resume.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from sparktui.core.clock import Clock, SystemClock
from sparktui.core.errors import RemoteError
from sparktui.core.logsig import parse_timestamp

MAX_LINE_BYTES = 64 * 1024
PIECE_BYTES = 16 * 1024
"""docker's log copier's buffer (moby ``daemon/logger/copier.go``
``defaultBufSize``): a line longer than this, and only such a line, can hold
the stamps docker repeats before each of its pieces."""
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0)
INSPECT_TIMEOUT_S = 10.0
CATCH_UP_TIMEOUT_S = 5.0
_TS = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d) ")


class StreamSource(Protocol):
    """What the follower needs of a node connection (adapters/ssh.NodeConnection)."""

    def stream(self, cmd: str) -> AsyncIterator[bytes]: ...


class CommandRunner(Protocol):
    async def run(self, cmd: str, timeout: float) -> object: ...


@dataclass(frozen=True, slots=True)
class LogLine:
    rank: int
    ts: str | None
    """docker's RFC 3339 timestamp, None when the line had none."""
    text: str
    """The line without timestamp and newline (``\\r`` and ANSI codes kept;
    the stamps docker repeats before the pieces of a long line dropped)."""
    truncated: bool = False

    @property
    def raw(self) -> str:
        return f"{self.ts} {self.text}" if self.ts else self.text


@dataclass(frozen=True, slots=True)
class OpenLine(LogLine):
    """A line still held, its newline not come (docker's 16 KiB pieces of a
    long tqdm bar): its text as far as its latest complete ``\\r`` redraw.
    Not a line of the log: the whole line follows (a LogLine, the same
    ``ts``) when its newline comes; read it for progress only."""


# LogLine(rank, ts, text, truncated) in a quarter of the time (the frozen
# dataclass's __init__ sets each field through object.__setattr__): the
# follower makes one per line.
_new = object.__new__
_ts_of = attrgetter("ts")
_set_rank, _set_ts, _set_text, _set_truncated = (
    LogLine.__dict__[name].__set__ for name in ("rank", "ts", "text", "truncated"))


def docker_logs_command(
    container: str, *, follow: bool, tail: int | None = None, since: str | None = None
) -> str:
    parts = ["docker", "logs"]
    if follow:
        parts.append("-f")
    if since is not None:
        parts += ["--since", shlex.quote(since)]
    elif tail is not None:
        parts += ["--tail", str(int(tail))]
    parts += ["--timestamps", shlex.quote(container)]
    return " ".join(parts) + " 2>&1"


JOURNAL_RESUME_LINES = 500


JOURNAL_MATCHES = "_TRANSPORT=kernel + SYSLOG_IDENTIFIER=systemd-journald"
"""The kernel's lines (NVRM, oom-killer) and journald's own notices. journald
logs "Under memory pressure, flushing caches." under its own identifier, not
the kernel transport, so a plain ``journalctl -k`` would never show it."""


def journal_command(resume_from: str | None) -> str:
    """Only new lines at first; after a drop, enough history to cover the gap
    (lines already delivered are skipped by timestamp)."""
    n = 0 if resume_from is None else JOURNAL_RESUME_LINES
    return f"journalctl -b -f -o short-iso-precise --no-pager -n {n} {JOURNAL_MATCHES} 2>&1"


def _joined(prefix: bytes, body: bytes) -> bytes:
    """``body`` without the stamps docker wrote before each piece after the
    first (``prefix``: the line's own ``TS ``, which every piece carries,
    copier.go ``partialTS``). A line's exact nanosecond stamp recurring in
    its own text can only be such a prefix."""
    return body.replace(prefix, b"") if prefix in body else body


def _ts_key(ts: bytes) -> tuple[bytes, int] | None:
    """Sortable key of a docker timestamp: (seconds text, nanoseconds).

    Only ``Z`` timestamps compare reliably as text; docker always writes UTC.
    """
    m = _TS.match(ts + b" ")
    if m is None:
        return None
    frac = (m.group(2) or b"").ljust(9, b"0")
    return m.group(1) + m.group(3), int(frac)


class LogFollower:
    """Follows one timestamped log; iterate :meth:`batches` or :meth:`lines`."""

    def __init__(
        self,
        source: StreamSource,
        command: Callable[[str | None], str],
        rank: int = 0,
        *,
        follow: bool = True,
        still_running: Callable[[], Awaitable[bool]] | None = None,
        clock: Clock | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
        backoff_s: tuple[float, ...] = BACKOFF_S,
        name: str = "",
        redraws: bool = False,
    ) -> None:
        """``command(resume_from)`` builds the remote command; ``resume_from``
        is None at first, then the last timestamp delivered. ``still_running``
        tells a dropped stream (resume) from an ended source (stop); without
        it, an ended stream ends the follow. ``redraws``: deliver a held
        line's latest redraw as an :class:`OpenLine`."""
        self.source = source
        self.command_for = command
        self.rank = rank
        self.name = name
        self.follow = follow
        self.still_running = still_running
        self.clock = clock or SystemClock()
        self.max_line_bytes = max_line_bytes
        self._fast_max = min(max_line_bytes, PIECE_BYTES)
        """The longest line the whole-chunk split takes (a longer one may hold
        docker's repeated stamps: :meth:`_line` joins it)."""
        self.redraws = redraws
        self._cut = False
        """The held line was shortened to its latest redraws (:meth:`_redraws`)."""
        self._redrawn: bytes | None = None
        """The redraw last delivered as an OpenLine."""
        self._tail: list[LogLine] = []
        """The last stream's unterminated end, delivered only when the follow
        ends (a resume reads it again, whole)."""
        self.backoff_s = backoff_s
        self.reconnects = 0
        self.lines_seen = 0
        self.last_error: str = ""
        self._last_ts: bytes | None = None
        self._last_key: tuple[bytes, int] | None = None
        self._same_ts = 0
        """Lines already delivered carrying exactly ``_last_ts``."""
        self._skip: tuple[tuple[bytes, int], int] | None = None
        """Lines up to this (key, count at that key) were delivered already
        (by a previous stream or a catch-up read): the stream drops them."""
        self.ended = False
        """The source ended (the container stopped) and its log was read to the end."""
        self.catch_up_command: Callable[[str | None], str] | None = None
        """``command`` without following (set by :meth:`for_container`)."""

    @classmethod
    def for_container(
        cls,
        source: StreamSource,
        container: str,
        rank: int = 0,
        *,
        follow: bool = True,
        tail: int | None = None,
        still_running: Callable[[], Awaitable[bool]] | None = None,
        clock: Clock | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> LogFollower:
        """A rank container's log; ``tail=None`` reads from the start of the boot."""

        def command(since: str | None) -> str:
            return docker_logs_command(container, follow=follow, tail=tail, since=since)

        def once(since: str | None) -> str:
            return docker_logs_command(container, follow=False, tail=tail, since=since)

        follower = cls(source, command, rank, follow=follow, still_running=still_running,
                       clock=clock, max_line_bytes=max_line_bytes, name=container,
                       redraws=follow)
        follower.catch_up_command = once
        return follower

    @classmethod
    def for_journal(cls, source: StreamSource, node: str, *, clock: Clock | None = None
                    ) -> LogFollower:
        """The node's kernel journal, followed until cancelled."""

        async def always() -> bool:
            return True

        return cls(source, journal_command, still_running=always, clock=clock,
                   name=f"{node}:journal")

    def command(self) -> str:
        return self.command_for(self._since())

    def _since(self) -> str | None:
        return self._last_ts.decode("ascii") if self._last_ts is not None else None

    @property
    def last_time(self) -> float | None:
        """Epoch seconds of the last delivered line (None before any)."""
        return parse_timestamp(self._since())

    async def lines(self) -> AsyncIterator[LogLine]:
        """Every line of :meth:`batches` (OpenLines among them with ``redraws``)."""
        async for batch in self.batches():
            for line in batch:
                yield line

    async def batches(self) -> AsyncIterator[list[LogLine]]:
        failures = 0
        drained = False
        while True:
            try:
                async for batch in self._one_stream():
                    failures = 0
                    yield batch
            except RemoteError as exc:
                self.last_error = exc.message
            else:
                if not self.follow or self.still_running is None:
                    self.ended = True
                    if self._tail:
                        yield self._end()
                    return
                if not await self._running():
                    if drained:
                        self.ended = True
                        if self._tail:
                            yield self._end()
                        return
                    # one more read from the last line: the stream may have been
                    # cut before the container wrote its last lines and exited
                    drained = True
                    continue
                self.last_error = "stream ended while the container runs"
            delay = self.backoff_s[min(failures, len(self.backoff_s) - 1)]
            failures += 1
            await self.clock.sleep(delay)
            self.reconnects += 1

    async def _running(self) -> bool:
        assert self.still_running is not None
        try:
            return await self.still_running()
        except RemoteError as exc:
            self.last_error = exc.message
            return True  # cannot tell: keep trying to follow

    def _end(self) -> list[LogLine]:
        """The log's unterminated end, now that the follow ends."""
        tail, self._tail = self._tail, []
        self._remember(tail)
        return tail

    async def catch_up(self, runner: CommandRunner,
                       timeout: float = CATCH_UP_TIMEOUT_S) -> list[LogLine]:
        """The lines the log holds beyond the last delivered one, read without
        following (they are then skipped by the live stream). Raises
        RemoteError when the node cannot tell."""
        if self.catch_up_command is None:
            return []
        cmd = self.catch_up_command(self._since())
        result = await runner.run(cmd, timeout)
        status = getattr(result, "exit_status", 0)
        text = getattr(result, "stdout", "")
        if status != 0:
            raise RemoteError(self.name, cmd, f"exit {status}: {text.strip()[:200]}")
        skip = self._cursor()
        out = []
        raws = text.encode("utf-8", "surrogateescape").split(b"\n")
        raws.pop()  # unterminated: docker's pieces of a line not written to its end
        for raw in raws:
            if not raw:
                continue
            line = self._line(*self._bounded(raw))
            skip, dup = self._dropped(line, skip)
            if not dup:
                out.append(line)
        if out:
            self._remember(out)
            self._skip = self._cursor()
        return out

    def _cursor(self) -> tuple[tuple[bytes, int], int] | None:
        return (self._last_key, self._same_ts) if self._last_key is not None else None

    def _dropped(self, line: LogLine, skip: tuple[tuple[bytes, int], int] | None
                 ) -> tuple[tuple[tuple[bytes, int], int] | None, bool]:
        """Is ``line`` one already delivered (at or before the ``skip`` cursor)?
        Returns the cursor left and the answer; the cursor clears at the first
        new line."""
        if skip is None:
            return None, False
        key = self._key_of(line)
        if key is None:
            return skip, False
        at, count = skip
        if key < at:
            return skip, True
        if key == at and count > 0:
            return (at, count - 1), True
        return None, False

    async def _one_stream(self) -> AsyncIterator[list[LogLine]]:
        self._skip = self._cursor()
        self._cut, self._tail = False, []
        pending = bytearray()
        dropping = False
        stream = self.source.stream(self.command())
        try:
            async for chunk in stream:
                out = None
                if not dropping and self._skip is None and not self._cut:
                    out = self._whole_lines(pending, chunk)
                if out is None:
                    out, dropping = self._split(pending, chunk, dropping)
                if out:
                    self._remember(out)
                if self.redraws and not dropping and b"\r" in pending:
                    redraw = self._open(pending)
                    if redraw is not None:
                        out.append(redraw)
                if out:
                    yield out
            if pending and not dropping:
                self._tail = [self._line(bytes(pending), self._cut)]
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _whole_lines(self, pending: bytearray, chunk: bytes) -> list[LogLine] | None:
        """The common chunk, split at once: ASCII, no line beyond the limit,
        nothing to skip. The lines :meth:`_split` would make of it (``pending``
        left as it would leave it), or None (and nothing changed) for any other."""
        nl = chunk.rfind(b"\n")
        if nl < 0 or len(chunk) - nl - 1 > self.max_line_bytes:
            return None
        head = bytes(pending) + chunk[:nl] if pending else chunk[:nl]
        if not head.isascii():
            return None
        text = head.decode("ascii")
        texts = text.split("\n")
        if max(map(len, texts)) > self._fast_max:
            return None
        pending.clear()
        pending += chunk[nl + 1:]
        rank = self.rank
        out: list[LogLine] = []
        add = out.append
        cr = "\r" in text
        for raw in texts:
            # what _line does, on text (ASCII: a character is a byte; ``ts`` is
            # what precedes the first space, when there is one)
            if cr and raw[-1:] == "\r":
                raw = raw[:-1]
            ts, sep, rest = raw.partition(" ")
            line = _new(LogLine)
            _set_rank(line, rank)
            if sep and 20 <= len(ts) <= 36 and ts[4] == "-" and ts[10] == "T":
                _set_ts(line, ts)
                _set_text(line, rest)
            else:
                _set_ts(line, None)
                _set_text(line, raw)
            _set_truncated(line, False)
            add(line)
        return out

    def _split(self, pending: bytearray, chunk: bytes, dropping: bool
               ) -> tuple[list[LogLine], bool]:
        """The lines a chunk completes, one at a time: a partial line is held
        in ``pending``, one beyond the limit shortened to its latest redraws
        or cut (the rest of it dropped: the flag returned), lines already
        delivered skipped."""
        out: list[LogLine] = []
        parts = chunk.split(b"\n")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if dropping:
                if not last:
                    dropping = False
                continue
            if last:
                pending += part
                if len(pending) > self.max_line_bytes:
                    short = self._redraws(pending)
                    if short is not None:
                        pending[:] = short
                        self._cut = True
                    else:
                        out.append(self._line(bytes(pending[: self.max_line_bytes]), True))
                        pending.clear()
                        self._cut, dropping = False, True
                continue
            if pending:
                pending += part
                raw = bytes(pending)
                pending.clear()
            else:
                raw = part
            raw, truncated = self._bounded(raw)
            truncated |= self._cut
            self._cut = False
            line = self._line(raw, truncated)
            self._skip, dup = self._dropped(line, self._skip)
            if not dup:
                out.append(line)
        return out, dropping

    def _bounded(self, raw: bytes) -> tuple[bytes, bool]:
        """A whole line within the limit: shortened to its latest redraws, or
        cut; and whether it was."""
        if len(raw) <= self.max_line_bytes:
            return raw, False
        short = self._redraws(raw)
        return (raw[: self.max_line_bytes] if short is None else short), True

    def _redraws(self, raw: bytes | bytearray) -> bytes | None:
        """A line of tqdm redraws beyond the limit, shortened to its stamp and
        its latest redraws: from the first ``\\r`` in its last half-limit
        (a line's own trailing ``\\r`` aside) to its end. What a terminal
        shows of it is kept (core/logsig ``clean`` reads the last redraw);
        None for a line with no ``\\r`` there (it is cut instead)."""
        keep = self.max_line_bytes // 2
        end = len(raw) - 1 if raw.endswith(b"\r") else len(raw)
        cr = raw.find(b"\r", len(raw) - keep, end)
        if cr < 0:
            return None
        sp = raw.find(b" ", 0, 37)
        head = raw[:sp + 1] if sp >= 20 and raw[4:5] == b"-" and raw[10:11] == b"T" else b""
        short = bytes(head) + bytes(raw[cr:])
        return short if len(short) <= self.max_line_bytes else None

    def _open(self, pending: bytearray) -> OpenLine | None:
        """The held line as far as its latest complete redraw (the ``\\r``
        that begins the next ends it), when that redraw is new."""
        cr = pending.rfind(b"\r")
        start = pending.rfind(b"\r", 0, cr) + 1
        redraw = bytes(pending[start:cr])
        if redraw == self._redrawn:
            return None
        self._redrawn = redraw
        line = self._line(bytes(pending[:cr]), self._cut)
        if not line.text.strip():  # only the stamp before the first redraw
            return None
        return OpenLine(line.rank, line.ts, line.text, line.truncated)

    def _line(self, raw: bytes, truncated: bool) -> LogLine:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        sp = raw.find(b" ")
        if 20 <= sp <= 36 and raw[4:5] == b"-" and raw[10:11] == b"T":
            ts = raw[:sp].decode("utf-8", "replace")
            body = raw[sp + 1:]
            if truncated or len(body) > PIECE_BYTES:
                body = _joined(raw[:sp + 1], body)
            text = body.decode("utf-8", "replace")
        else:
            ts, text = None, raw.decode("utf-8", "replace")
        return LogLine(self.rank, ts, text, truncated)

    @staticmethod
    def _key_of(line: LogLine) -> tuple[bytes, int] | None:
        return _ts_key(line.ts.encode("ascii", "replace")) if line.ts else None

    def _remember(self, lines: list[LogLine]) -> None:
        self.lines_seen += len(lines)
        for line in reversed(lines):
            if line.ts is None:
                continue
            ts = line.ts.encode("ascii", "replace")
            same = list(map(_ts_of, lines)).count(line.ts)
            if ts == self._last_ts:
                self._same_ts += same
            else:
                self._last_ts, self._last_key = ts, _ts_key(ts)
                self._same_ts = same
            return


async def container_state(runner: CommandRunner, container: str) -> dict[str, object] | None:
    """``docker inspect --format '{{json .State}}' NAME`` as a dict; None when
    the container does not exist (or the output is not JSON)."""
    cmd = f"docker inspect --format '{{{{json .State}}}}' {shlex.quote(container)} 2>&1"
    result = await runner.run(cmd, INSPECT_TIMEOUT_S)
    text = getattr(result, "stdout", "")
    try:
        state = json.loads(text)
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def running_check(runner: CommandRunner, container: str) -> Callable[[], Awaitable[bool]]:
    """A ``still_running`` callback for :class:`LogFollower`."""

    async def check() -> bool:
        state = await container_state(runner, container)
        return bool(state and state.get("Running"))

    return check
