"""The night's recording: every event the console's service reports (node
snapshots, lane changes, followed log lines, alerts, workflow events) as
gzip JSON lines, one file per night in ``<state_dir>/recordings/``, read back
by ``sparktui replay`` (service/replay.py) and by ``sparktui bundle``.

Each line is ``{"t": <epoch s>, "e": <event>}``; an event is its dataclass
with a ``"$"`` naming the class, so the replay gets the very objects the
console got. A new console run appends a gzip member (readers see one
stream). The file is size bounded (``[record] max_mb``): past half of it node
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

import dataclasses
import gzip
import json
import logging
import queue
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
        self._raw: IO[bytes] | None = None
        self._gz: gzip.GzipFile | None = None
        self._last_flush = 0.0
        self._unflushed = False
        self._last_node: dict[str, tuple[float, str, int]] = {}
        self._queue: queue.SimpleQueue[tuple[float, _events.ServiceEvent] | None] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._raw = open(self.path, "ab")  # noqa: SIM115 (closed by close())
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="ab")
        self._thread = threading.Thread(target=self._run, name=f"recorder {self.path.name}",
                                        daemon=True)
        self._thread.start()

    @property
    def size(self) -> int:
        return self._raw.tell() if self._raw is not None else 0

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
                self._flush(force=self._unflushed)
                continue
            if item is None:
                break
            try:
                self._record(*item)
            except Exception:  # a full disk must not lose the rest silently
                log.exception("recording: event not written")
        self._flush(force=True)

    def _record(self, t: float, ev: _events.ServiceEvent) -> None:
        if self._gz is None or self.stopped:
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
        assert self._gz is not None
        self._gz.write(json.dumps(data, separators=(",", ":"), default=str).encode() + b"\n")
        self._unflushed = True

    def _flush(self, now: float = 0.0, *, force: bool = False) -> None:
        """``now``: the stamp of the event just written (the pace is the events')."""
        if self._gz is not None and (force or now - self._last_flush >= FLUSH_EVERY_S):
            self._gz.flush(zlib.Z_SYNC_FLUSH)
            self._last_flush = max(now, self._last_flush)
            self._unflushed = False

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
        if self._gz is not None:
            self._gz.close()
            self._gz = None
        if self._raw is not None:
            self._raw.close()
            self._raw = None


def read_recording(path: Path) -> Iterator[tuple[float, _events.ServiceEvent]]:
    """Every event of a recording in order; a torn end (the console still
    writing, or killed) ends the stream quietly, a line that does not decode
    is skipped."""
    with gzip.open(path, "rb") as f:
        while True:
            try:
                line = f.readline()
            except (EOFError, OSError, zlib.error):
                return
            if not line:
                return
            try:
                data = json.loads(line)
                if "e" in data:
                    yield float(data["t"]), decode(data["e"])
            except (ValueError, TypeError, KeyError) as exc:
                log.debug("recording line skipped: %r", exc)
