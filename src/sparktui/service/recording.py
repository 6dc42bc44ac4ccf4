"""The night's recording: every event the console's service reports (node
snapshots, lane changes, followed log lines, alerts, workflow events) as
gzip JSON lines, one file per night in ``<state_dir>/recordings/``, read back
by ``sparktui replay`` (service/replay.py) and by ``sparktui bundle``.

Each line is ``{"t": <epoch s>, "e": <event>}``; an event is its dataclass
with a ``"$"`` naming the class, so the replay gets the very objects the
console got. Every flush appends one whole gzip member, written by one
``write``: a member torn by a full disk or a kill loses only itself, and the
reader skips a damaged member (resyncing on the next gzip header) and says
how many it skipped. A write that fails (ENOSPC) is undone (the file cut back
to its last whole member), logged once, and the recording resumes when a
later flush succeeds, with a ``gap`` line counting the events lost. The file
is 0600 and its directory 0700 whatever the umask, and neither is followed
when it is a symlink. The file is size bounded (``[record] max_mb``): past half of it node
snapshots are thinned to one per node per 30 s (state changes always kept),
past 90 % only alerts, lanes, workflows and state changes, and at the bound
a last line says the recording stopped.

The console's loop only queues an event: a writer thread owned by the
`Recorder` encodes, compresses and writes it (at 1,000 log lines a second
that work would otherwise sit between a key and its frame). `close()` writes
every event still queued before it returns: the last events of a console
ended by `q`, SIGTERM or SIGHUP are in the file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import logging
import math
import os
import queue
import stat
import threading
import time
import typing
import zlib
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from types import ModuleType, UnionType
from typing import IO, Any

from sparktui.core import state as _state
from sparktui.core import thrash as _thrash
from sparktui.core.clock import Clock
from sparktui.ops import events as _ops_events
from sparktui.service import events as _events
from sparktui.service import lanes as _lanes
from sparktui.watch import follower as _follower
from sparktui.watch import readiness as _readiness

log = logging.getLogger(__name__)

RECORDING_DIR = "recordings"
FLUSH_EVERY_S = 5.0
CLOSE_WAIT_S = 30.0
"""How long `close()` waits for the writer thread to write what is queued."""
THIN_EVERY_S = 30.0


def _registry(*modules: ModuleType) -> dict[str, type]:
    out: dict[str, type] = {}
    for m in modules:
        for value in vars(m).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) \
                    and value.__module__ == m.__name__:
                out[value.__name__] = value
    return out


CLASSES = _registry(_state, _thrash, _events, _lanes, _follower, _readiness, _ops_events)
"""Every dataclass a service event can hold, by name."""


def encode(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {"$": type(obj).__name__}
        for f in dataclasses.fields(obj):
            out[f.name] = encode(getattr(obj, f.name))
        return out
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, list | tuple):
        return [encode(x) for x in obj]
    if isinstance(obj, typing.Mapping):
        return {str(k): encode(v) for k, v in obj.items()}
    return obj


_HINTS: dict[type, dict[str, Any]] = {}


def decode(data: Any, hint: Any = None) -> Any:
    if isinstance(data, dict) and "$" in data:
        cls = CLASSES.get(data["$"])
        if cls is None:
            raise ValueError(f"unknown class {data['$']!r}")
        hints = _HINTS.get(cls)
        if hints is None:
            hints = _HINTS[cls] = typing.get_type_hints(cls)
        kwargs = {f.name: decode(data[f.name], hints.get(f.name))
                  for f in dataclasses.fields(cls) if f.init and f.name in data}
        return cls(**kwargs)
    if data is None or hint is None:
        return data
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, UnionType):
        for arg in args:
            if arg is type(None):
                continue
            try:
                return decode(data, arg)
            except (ValueError, TypeError):
                continue
        return data
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(data)
    if origin is tuple and isinstance(data, list):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(x, args[0]) for x in data)
        return tuple(decode(x, a) for x, a in zip(data, args, strict=False))
    if origin in (dict, typing.Mapping, typing.get_origin(typing.Mapping[str, str])) \
            and isinstance(data, dict) and len(args) == 2:
        return {k: decode(v, args[1]) for k, v in data.items()}
    if origin is list and isinstance(data, list) and args:
        return [decode(x, args[0]) for x in data]
    return data


def night_path(state_dir: Path, t: float) -> Path:
    """One file per night: a night runs from noon to noon (local time: the
    operator's night, as the file name reads)."""
    day = time.strftime("%Y-%m-%d", time.localtime(t - 12 * 3600))
    return state_dir / RECORDING_DIR / f"night-{day}.jsonl.gz"


class Recorder:
    """Appends the service's events to tonight's file (in its writer thread);
    `close()` writes what is queued and ends it."""

    def __init__(self, path: Path, *, max_bytes: int, clock: Clock) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.clock = clock
        self.stopped = ""
        """Why recording stopped (the size bound), or empty."""
        self.failing = ""
        """Why the last write failed (a full disk), or empty once one succeeds."""
        self.lost = 0
        """Events dropped since writes began failing (reported in the ``gap`` line)."""
        self._fd: int | None = None
        self._size = 0
        self._buf: list[bytes] = []
        self._last_flush = 0.0
        self._last_node: dict[str, tuple[float, str, int]] = {}
        self._queue: queue.SimpleQueue[tuple[float, _events.ServiceEvent] | None] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        self._fd = open_private(self.path)
        self._size = os.fstat(self._fd).st_size
        self._line({"t": self.clock.time(), "session": os.getpid()})  # a run begins
        self._start_writer()

    def _start_writer(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"recorder {self.path.name}",
                                        daemon=True)
        self._thread.start()

    @property
    def size(self) -> int:
        return self._size + sum(len(b) for b in self._buf) // 4  # queued lines, compressed

    def write(self, ev: _events.ServiceEvent) -> None:
        """Queue one event, stamped now; the writer thread records it."""
        if self._thread is not None and not self.stopped:
            self._queue.put((self.clock.time(), ev))

    def _run(self) -> None:
        """The writer thread: every queued event in order until close()'s None;
        what it wrote reaches the file within FLUSH_EVERY_S even when the night
        goes quiet."""
        while True:
            try:
                item = self._queue.get(timeout=FLUSH_EVERY_S)
            except queue.Empty:
                self._flush(self._last_flush, force=True)
                continue
            if item is None:
                break
            try:
                self._record(*item)
            except Exception:  # an event that does not encode: a bug, not the disk's
                log.exception("recording: event not written")
        self._flush(self._last_flush, force=True)

    def _record(self, t: float, ev: _events.ServiceEvent) -> None:
        if self._fd is None or self.stopped:
            return
        size = self.size
        if size >= self.max_bytes:
            self._line({"t": t, "end": "size bound reached: recording stopped"})
            self.stopped = f"{self.path} reached {self.max_bytes} bytes"
            log.warning("recording stopped: %s", self.stopped)
            self._flush(t, force=True)
            return
        if not self._keep(ev, size / self.max_bytes):
            return
        self._line({"t": t, "e": encode(ev)})
        self._flush(t, force=isinstance(ev, _events.AlertRaised))

    def _keep(self, ev: _events.ServiceEvent, used: float) -> bool:
        if isinstance(ev, _events.NodeSampled):
            snap = ev.snapshot
            level = int(ev.verdict.level) if ev.verdict else 0
            last = self._last_node.get(snap.node)
            changed = last is None or (last[1], last[2]) != (snap.state.value, level)
            if used >= 0.5 and not changed and snap.taken_at - last[0] < THIN_EVERY_S:  # type: ignore[index]
                return False
            if used >= 0.9 and not changed:
                return False
            self._last_node[snap.node] = (snap.taken_at, snap.state.value, level)
            return True
        return not (used >= 0.9 and isinstance(ev, _events.LogLinesArrived))

    def _line(self, data: dict[str, Any]) -> None:
        self._buf.append(json.dumps(data, separators=(",", ":"), default=str).encode() + b"\n")

    def _flush(self, now: float, *, force: bool = False) -> None:
        """Write what is buffered as one gzip member. ``now``: the stamp of the
        event just written (the pace is the events')."""
        if self._fd is None or not self._buf \
                or not (force or now - self._last_flush >= FLUSH_EVERY_S):
            return
        self._last_flush = max(now, self._last_flush)
        lines, self._buf = self._buf, []
        if self.failing:
            lines.insert(0, json.dumps({"t": now, "gap": self.lost, "why": self.failing},
                                       separators=(",", ":")).encode() + b"\n")
        member = gzip.compress(b"".join(lines), mtime=0)
        try:
            write_all(self._fd, member)
        except OSError as exc:
            self._undo()
            lost = sum(1 for line in lines if line.startswith(b'{"t":') and b',"e":' in line)
            self.lost += lost
            if not self.failing:
                self.failing = exc.strerror or str(exc)
                log.warning("recording paused: %s: %s; events are dropped until a write "
                            "succeeds", self.path, self.failing)
            return
        self._size += len(member)
        if self.failing:
            log.warning("recording resumed: %s: %d events lost while %s",
                        self.path, self.lost, self.failing)
            self.failing, self.lost = "", 0

    def _undo(self) -> None:
        """Cut the file back to its last whole member (a shorter file needs no
        space); when even that fails the reader skips the torn member."""
        assert self._fd is not None
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._size)

    def close(self) -> None:
        """Write what is queued, then close the file."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(CLOSE_WAIT_S)
            if thread.is_alive():  # a hung disk: the thread owns the file until it ends
                log.warning("recording: %s still writing after %.0f s; not closed",
                            self.path, CLOSE_WAIT_S)
                return
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def write_all(fd: int, data: bytes) -> None:
    """One ``os.write`` per member as a rule; a short write goes on (the OS
    boundary a full-disk test injects at)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def private_dir(path: Path) -> None:
    """``path`` a real directory, 0700 whatever the umask; a symlink (or
    anything else) in its place is refused, never followed."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{path}: not a directory (a symlink is not followed)")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)


def open_private(path: Path) -> int:
    """The night file for appending, 0600, never through a symlink."""
    path.parent.parent.mkdir(parents=True, exist_ok=True)
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        if stat.S_IMODE(st.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


CHUNK = 1 << 20
"""Bytes read, and decompressed, at a time (a decompression bomb stays bounded)."""
MAX_LINE = 1 << 20
"""A longer line is not an event: skipped, counted."""
MAX_T = 1e11
"""Epoch seconds past this (year 5138) are not a recorded time."""
_MAGIC = b"\x1f\x8b\x08"


@dataclasses.dataclass
class Damage:
    """What a read skipped: whole gzip members that did not decompress,
    lines that were not events (too long, not JSON, wrong fields, a time
    that is not a finite epoch), and whether the last member was torn."""

    pieces: int = 0
    lines: int = 0
    torn_end: bool = False

    def __bool__(self) -> bool:
        return bool(self.pieces or self.lines or self.torn_end)

    def describe(self) -> str:
        parts = []
        if self.pieces:
            parts.append(f"{self.pieces} damaged piece{'s' * (self.pieces != 1)} skipped")
        if self.lines:
            what = "lines that are not events" if self.lines != 1 else "line that is not an event"
            parts.append(f"{self.lines} {what}")
        if self.torn_end:
            parts.append("the last piece is torn (still being written, or cut)")
        return "; ".join(parts)


def _pieces(f: IO[bytes], damage: Damage) -> Iterator[bytes | None]:
    """Decompressed bytes member after member; None where a member broke off
    (its partial last line is not a line). A member that fails is skipped from
    its start to the next gzip header."""
    base = 0  # file offset of pending[0]
    pending = b""
    start = 0  # file offset of the current member
    d = zlib.decompressobj(31)
    fresh = True  # d has taken no byte
    resyncing = False
    while True:
        if not pending:
            pending = f.read(CHUNK)
            if not pending:
                if not fresh:
                    damage.torn_end = True
                    yield None
                return
        data = pending
        try:
            out = d.decompress(data, CHUNK)
        except zlib.error:
            if not resyncing:
                damage.pieces += 1
            resyncing = True
            yield None
            start, pending = _resync(f, start + 1)
            base, d, fresh = start, zlib.decompressobj(31), True
            continue
        fresh = False
        if out:
            yield out
        if d.eof:
            rest = d.unused_data
            base += len(data) - len(rest)
            pending, start, d, fresh, resyncing = rest, base, zlib.decompressobj(31), True, False
            if not pending.strip(b"\0"):  # zero padding (a cut-back file) is no member
                pending = b""
        else:
            rest = d.unconsumed_tail
            base += len(data) - len(rest)
            pending = rest


def _resync(f: IO[bytes], at: int) -> tuple[int, bytes]:
    """The next gzip header at or after file offset ``at`` and the bytes from it
    (empty at the end of the file)."""
    f.seek(at)
    carry = b""
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            return at + len(carry), b""
        data = carry + chunk
        i = data.find(_MAGIC)
        if i >= 0:
            return at + i, data[i:]
        keep = len(_MAGIC) - 1
        at += len(data) - keep
        carry = data[-keep:]


def _lines(f: IO[bytes], damage: Damage) -> Iterator[bytes]:
    partial = b""
    skipping = False  # inside a line past MAX_LINE
    for piece in _pieces(f, damage):
        if piece is None:
            partial, skipping = b"", False
            continue
        if not partial and not piece.strip():
            continue  # blank lines: no per-line work
        *whole, last = (partial + piece).split(b"\n")
        for line in whole:
            if skipping:
                skipping = False
            elif len(line) > MAX_LINE:
                damage.lines += 1
            elif line.strip():
                yield line
        partial = last
        if len(partial) > MAX_LINE:
            if not skipping:
                damage.lines += 1
            partial, skipping = b"", True
    if partial.strip() and not skipping:
        yield partial


def _time(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not 0 <= value <= MAX_T:
        raise ValueError(f"t={value!r} is not a recorded time")
    return float(value)


def read_recording(path: Path, damage: Damage | None = None
                   ) -> Iterator[tuple[float, _events.ServiceEvent]]:
    """Every event of a recording in order. A damaged piece (a torn or corrupt
    gzip member) or a line that is not an event is skipped and counted in
    ``damage``; when the caller passes none, the count is logged as one
    warning at the end."""
    for t, ev in _entries(path, damage):
        if ev is not None:
            yield t, ev


EVENTS = typing.get_args(_events.ServiceEvent)
"""What a line's ``e`` may hold (a state or a log line alone is no event)."""
SESSION_GAP_S = 60.0
"""A recorded time this far behind the one before starts a new session (a
file written before runs were marked: two demo runs' simulated clocks overlap)."""

Session = list[tuple[float, _events.ServiceEvent]]


def read_sessions(path: Path, damage: Damage | None = None) -> list[Session]:
    """The recording's runs (each console or sentinel run), each in time
    order: a ``session`` line starts one, and so does a time far behind the
    last (an unmarked file)."""
    sessions: list[Session] = [[]]
    last: float | None = None
    for t, ev in _entries(path, damage):
        if (ev is None or (last is not None and t < last - SESSION_GAP_S)) and sessions[-1]:
            sessions.append([])
        last = t
        if ev is not None:
            sessions[-1].append((t, ev))
    for s in sessions:
        s.sort(key=lambda p: p[0])  # stable: a run's own jitter only
    return [s for s in sessions if s]


def _entries(path: Path, damage: Damage | None
             ) -> Iterator[tuple[float, _events.ServiceEvent | None]]:
    """Events, and None where a run began."""
    own = damage is None
    seen = Damage() if damage is None else damage
    with open(path, "rb") as f:
        for line in _lines(f, seen):
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise TypeError("not an object")
                t = _time(data.get("t"))
                if "e" in data:
                    ev = decode(data["e"])
                    if not isinstance(ev, EVENTS):
                        raise TypeError(f"not a service event: {type(ev).__name__}")
                    yield t, ev
                elif "session" in data:
                    yield t, None
            except (ValueError, TypeError, KeyError, RecursionError) as exc:
                seen.lines += 1
                log.debug("recording line skipped: %r", exc)
    if own and seen:
        log.warning("recording %s: %s", path, seen.describe())
