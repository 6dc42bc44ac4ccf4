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
when it is a symlink (ops/private.py). The file is size bounded
(``[record] max_mb``): past half of it node snapshots are thinned to one per
node per 30 s (state changes always kept), past 90 % only alerts, lanes,
workflows and state changes, and at the bound a last line says the recording
stopped.

After each member it wrote whole the writer appends the member's record to
the night's index (``night-X.jsonl.gz.idx``, 0600, never through a symlink;
service/recordindex.py): where the member lies and each line's time, class,
route and length, so ``sparktui replay`` opens a night without decompressing
it. The index is a cache: a member undone writes no record, and a write of
the index that fails is logged once and stops the index for this run, never
the recording.

The console's loop only queues an event: a writer thread owned by the
`Recorder` encodes, compresses and writes it, and its index record (at 1,000
log lines a second that work would otherwise sit between a key and its
frame). `close()` writes every event still queued before it returns: the
last events of a console ended by `q`, SIGTERM or SIGHUP are in the file.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from sparktui.core.clock import Clock
from sparktui.ops.private import open_private, private_dir
from sparktui.service import events as _events
from sparktui.service.codec import encode
from sparktui.service.recorded import route
from sparktui.service.recordindex import Meta, index_path, last_end, record

log = logging.getLogger(__name__)

RECORDING_DIR = "recordings"
FLUSH_EVERY_S = 5.0
CLOSE_WAIT_S = 30.0
"""How long `close()` waits for the writer thread to write what is queued."""
THIN_EVERY_S = 30.0


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
        self._meta: list[Meta] = []
        """What the index says of each line in ``_buf``."""
        self._index_fd: int | None = None
        self._last_flush = 0.0
        self._last_node: dict[str, tuple[float, str, int]] = {}
        self._queue: queue.SimpleQueue[tuple[float, _events.ServiceEvent] | None] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        private_dir(self.path.parent.parent, self.path.parent.name)
        self._fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = os.fstat(self._fd).st_size
        self._open_index()
        t = self.clock.time()
        self._line({"t": t, "session": os.getpid()}, (t,))  # a run begins
        self._start_writer()

    def _open_index(self) -> None:
        """The night's index (service/recordindex.py), emptied with a night that
        is empty. None for a night whose index does not end where the night
        does (begun without one, or one stopped or torn earlier tonight): a
        record not chained to the file's start is never trusted."""
        idx = index_path(self.path)
        if self._size and not os.path.lexists(idx):
            return
        try:
            fd = open_private(idx, os.O_RDWR | os.O_APPEND | (0 if self._size else os.O_TRUNC))
        except OSError as exc:
            log.warning("recording index not written: %s; replay opens this night more "
                        "slowly", exc)
            return
        try:
            if self._size and last_end(fd) != self._size:
                log.debug("recording index %s does not end where the night does: not "
                          "written tonight", idx)
                os.close(fd)
                return
        except OSError as exc:
            os.close(fd)
            log.warning("recording index not written: %s; replay opens this night more "
                        "slowly", exc)
            return
        self._index_fd = fd

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
            self._line({"t": t, "end": "size bound reached: recording stopped"}, None)
            self.stopped = f"{self.path} reached {self.max_bytes} bytes"
            log.warning("recording stopped: %s", self.stopped)
            self._flush(t, force=True)
            return
        if not self._keep(ev, size / self.max_bytes):
            return
        self._line({"t": t, "e": encode(ev)}, (t, type(ev).__name__, route(ev)))
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

    def _line(self, data: dict[str, Any], meta: Meta) -> None:
        self._buf.append(json.dumps(data, separators=(",", ":"), default=str).encode() + b"\n")
        self._meta.append(meta)

    def _flush(self, now: float, *, force: bool = False) -> None:
        """Write what is buffered as one gzip member. ``now``: the stamp of the
        event just written (the pace is the events')."""
        if self._fd is None or not self._buf \
                or not (force or now - self._last_flush >= FLUSH_EVERY_S):
            return
        self._last_flush = max(now, self._last_flush)
        lines, self._buf = self._buf, []
        metas, self._meta = self._meta, []
        if self.failing:
            lines.insert(0, json.dumps({"t": now, "gap": self.lost, "why": self.failing},
                                       separators=(",", ":")).encode() + b"\n")
            metas.insert(0, None)
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
        self._index(member, lines, metas)
        if self.failing:
            log.warning("recording resumed: %s: %d events lost while %s",
                        self.path, self.lost, self.failing)
            self.failing, self.lost = "", 0

    def _index(self, member: bytes, lines: list[bytes], metas: list[Meta]) -> None:
        """The index's record of the member just written. Its offset is where
        the append left the file's offset less its length: the kernel's, so
        another process appending to the night meanwhile cannot make it lie.
        The index is a cache: a write of it that fails stops it for the night
        (logged once) and never the recording."""
        if self._index_fd is None:
            return
        try:
            assert self._fd is not None
            at = os.lseek(self._fd, 0, os.SEEK_CUR) - len(member)
            write_all(self._index_fd, record(at, member, lines, metas))
        except Exception as exc:  # a full disk, or a bug: the night goes on without it
            log.warning("recording index stopped: %s: %s; replay opens this night more "
                        "slowly", self.path, exc)
            self._close_index()

    def _close_index(self) -> None:
        if self._index_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._index_fd)
            self._index_fd = None

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
        self._close_index()
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
