"""The audit journal: append-only JSONL in the state dir, fsynced per entry.

Each workflow writes ``begin``, then for each step an ``intent`` (before the
step acts) and an ``outcome`` (after), then ``end``. Every entry is one line
written with a single ``write`` on an ``O_APPEND`` descriptor under an
exclusive ``flock`` and ``fsync``ed before the step goes on, so a crash at any
point loses nothing that happened: at worst the last line is torn, and the
reader skips a line that is not valid JSON. A workflow with a ``begin`` and no
``end`` is *unfinished* and offered at the next start (a power cycle whose
plug went off and never came back on).

Entry fields: ``t`` (epoch s), ``wf`` (workflow id), ``kind`` (begin, guards
(every verdict the run enforced), intent, outcome, end, refused, override,
note), ``workflow`` (serve, stop, power-cycle ...), ``target``, and per kind
``step``, ``action``, ``ok``, ``message``, ``detail``. Secrets never go in: every string is redacted
(core/redact.py) before it is written.

Durability: an entry is written completely (short writes are continued) and
fsynced, or `append` raises `JournalError` (disk full, read-only filesystem,
no permission) after cutting off what it wrote, so a workflow refuses to act
without its intent on disk. Reading, a line that parses but carries a
non-finite or absurd value (``"t": NaN``, ``1e300``) is skipped like a torn
line and counted in `Journal.skipped`.

The way out of a full disk: a workflow that switches plugs first makes
`Journal.reserve` (``journal.reserve``, `RESERVE_BYTES` allocated in the state
dir) or refuses to start. When a write then finds the disk full, the reserve
is released and that workflow goes only its way out: an outcome, a note or an
end is written from the freed space (a plug change is never left out of the
journal), an intent only inside `Journal.way_out` (the plug turned back on);
any other intent of that workflow refuses, so it acts no further. Another
writer on the same filesystem can take the freed space first; then the write
refuses as without a reserve.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import json
import logging
import math
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparktui.core.clock import Clock, SystemClock
from sparktui.core.errors import OperatorError
from sparktui.core.redact import redact, redact_value
from sparktui.ops.private import NotPrivate, open_private, private_dir

log = logging.getLogger(__name__)
JOURNAL_FILE = "journal.jsonl"
LATEST_T = 4_102_444_800.0
"""2100-01-01: a journal time after this (or before 0) is absurd, not a record."""
RESERVE_FILE = "journal.reserve"
SIMULATED = "simulated"
"""An entry's ``clock`` when the writing process ran on a simulator's clock
(the demo's console); absent (``""``) for the wall clock. One state dir can hold
both, and the two are never compared (issue 25)."""


def clock_of(clock: Clock) -> str:
    """The ``clock`` a journal written on ``clock`` stamps its entries with."""
    return "" if isinstance(clock, SystemClock) else SIMULATED


def clock_name(clock: str) -> str:
    """An entry's ``clock`` as the operator reads it."""
    return "the simulator's clock" if clock == SIMULATED else "the wall clock"

RESERVE_BYTES = 256 * 1024
"""Space held for a workflow's way out of a full disk: a resume-sized tail of
entries (intents, outcomes, notes, end) for every plug of a cluster is a few KiB."""
_write = os.write
"""The one call that writes journal bytes (a seam for disk-full fault tests)."""
_allocate = os.posix_fallocate
"""The one call that allocates the reserve (a seam for nearly-full-disk tests)."""
_FULL = (errno.ENOSPC, errno.EDQUOT)
_way_out: contextvars.ContextVar[bool] = contextvars.ContextVar("journal_way_out",
                                                                default=False)


class JournalError(OperatorError):
    """The journal cannot be written: nothing that needed the entry was done."""

    errno: int | None = None
    """The OSError's errno, when one caused it."""


_FIXES = {
    errno.ENOSPC: "the disk is full -> free space on it",
    errno.EDQUOT: "the disk quota is exhausted -> free space on it",
    errno.EROFS: "the filesystem is read-only -> remount it read-write or point "
                 "[console] state_dir elsewhere",
    errno.EACCES: "permission denied -> fix the owner/mode of the file and its folder",
    errno.EPERM: "permission denied -> fix the owner/mode of the file and its folder",
}


@dataclass(frozen=True)
class Entry:
    t: float
    wf: str
    kind: str
    workflow: str = ""
    target: str = ""
    step: str = ""
    action: str = ""
    ok: bool | None = None
    message: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    clock: str = ""
    """Which clock ``t`` is on: ``""`` the wall's, :data:`SIMULATED` a simulator's."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": round(self.t, 3), "wf": self.wf, "kind": self.kind}
        for key in ("workflow", "target", "step", "action", "message", "clock"):
            if value := getattr(self, key):
                out[key] = value
        if self.ok is not None:
            out["ok"] = self.ok
        if self.detail:
            out["detail"] = self.detail
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        """An entry, or ValueError/KeyError/TypeError for a line that is not one."""
        t = float(data["t"])
        if not (math.isfinite(t) and 0 <= t <= LATEST_T):
            raise ValueError(f"t is {data['t']!r}")
        if data.get("ok") not in (None, True, False):
            raise ValueError(f"ok is {data['ok']!r}")
        if not isinstance(data.get("detail") or {}, dict):
            raise ValueError("detail is not an object")
        if data.get("clock", "") not in ("", SIMULATED):
            raise ValueError(f"clock is {data['clock']!r}")
        return cls(
            t=t, wf=str(data["wf"]), kind=str(data["kind"]),
            workflow=str(data.get("workflow", "")), target=str(data.get("target", "")),
            step=str(data.get("step", "")), action=str(data.get("action", "")),
            ok=data.get("ok"), message=str(data.get("message", "")),
            detail=dict(data.get("detail") or {}), clock=str(data.get("clock", "")),
        )


@dataclass(frozen=True)
class StepRecord:
    step: str
    target: str
    action: str
    started_at: float
    ok: bool | None
    """None: the intent was written and no outcome followed (the step is in doubt)."""
    message: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    finished_at: float | None = None
    """When the outcome was written (a plug step: when its new state was confirmed)."""


@dataclass(frozen=True)
class WorkflowRecord:
    """One workflow as the journal tells it."""

    wf: str
    workflow: str
    target: str
    began_at: float
    detail: dict[str, Any]
    steps: tuple[StepRecord, ...]
    ended_at: float | None = None
    ok: bool | None = None
    message: str = ""
    end_detail: dict[str, Any] = field(default_factory=dict)
    clock: str = ""
    """The clock its ``begin`` and steps are on (its own process's, :data:`SIMULATED` or "")."""
    end_clock: str = ""
    """The clock its ``end`` is on: another process's when a resume or the
    operator ended it (a shell on wall time ending a demo's cycle)."""

    @property
    def finished(self) -> bool:
        return self.ended_at is not None

    def done(self, step: str, target: str | None = None) -> bool:
        return any(s.step == step and s.ok and (target is None or s.target == target)
                   for s in self.steps)

    def describe(self) -> str:
        on = " (the simulator's clock)" if self.clock == SIMULATED else ""
        parts = [f"{self.workflow} {self.target} ({self.wf}) began "
                 f"{_hhmm(self.began_at)}{on} and never ended"]
        for s in self.steps:
            state = "in doubt (no outcome)" if s.ok is None else ("done" if s.ok else "failed")
            parts.append(f"{s.step} [{s.target}] {state} at {_hhmm(s.started_at)}")
        return "; ".join(parts)


def _hhmm(t: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(t))


def new_workflow_id(kind: str, clock: Clock) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(clock.time()))
    return f"{kind}-{stamp}-{secrets.token_hex(3)}"


class Journal:
    def __init__(self, path: Path, clock: Clock | None = None) -> None:
        self.path = path
        self.clock = clock or SystemClock()
        self.skipped: list[str] = []
        """Why each unreadable line of the last read was skipped ("line N: reason")."""
        self._warned: set[str] = set()
        self._on_reserve: set[str] = set()
        """Workflows during which the disk filled: they go only their way out."""

    @property
    def reserve_path(self) -> Path:
        return self.path.with_name(RESERVE_FILE)

    def reserve(self) -> None:
        """Hold `RESERVE_BYTES` allocated beside the journal (kept while it is
        there), or raise `JournalError`: a workflow that could not journal its
        way out of a full disk (a plug turned back on) must not start."""
        path = self.reserve_path
        with contextlib.suppress(OSError):
            if path.stat().st_blocks * 512 >= RESERVE_BYTES:
                return
        try:
            private_dir(path.parent)
            fd = open_private(path, os.O_RDWR)
        except OSError as exc:
            raise self._error(exc) from None
        try:
            try:
                _allocate(fd, 0, RESERVE_BYTES)
            except OSError as exc:  # a filesystem without fallocate: write the blocks
                if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                os.ftruncate(fd, 0)
                _write_all(fd, bytes(RESERVE_BYTES))
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            fix = _FIXES.get(exc.errno or 0, "check the file and its filesystem")
            raise JournalError(
                f"cannot reserve {RESERVE_BYTES // 1024} KiB for the journal in "
                f"{path.parent} ({exc.strerror or exc}): {fix}; refusing to start: a plug "
                f"switched now could not be journaled back on if the disk filled") from None
        os.close(fd)
        _fsync_dir(path.parent)

    def _release(self) -> bool:
        """Free the reserve for the way out; False when there was none."""
        try:
            self.reserve_path.unlink()
        except OSError:
            return False
        _fsync_dir(self.path.parent)
        log.warning("journal %s: the disk is full: the reserve was released to journal "
                    "the way out", self.path)
        return True

    @staticmethod
    @contextlib.contextmanager
    def way_out() -> Iterator[None]:
        """Intents written inside are a workflow's way out (turning a plug back
        on): they are written from the reserve after the disk filled."""
        token = _way_out.set(True)
        try:
            yield
        finally:
            _way_out.reset(token)

    @classmethod
    def in_state_dir(cls, state_dir: Path, clock: Clock | None = None) -> Journal:
        return cls(state_dir / JOURNAL_FILE, clock)

    def append(self, wf: str, kind: str, **fields: Any) -> Entry:
        """Write one entry completely and fsync it before returning; raise
        `JournalError` (saying why and what to do) when it cannot be."""
        entry = Entry(t=self.clock.time(), wf=wf, kind=kind, clock=clock_of(self.clock),
                      **{k: redact_value(v) for k, v in fields.items()})
        line = (json.dumps(_finite(entry.to_json()), separators=(",", ":"), default=str)
                + "\n").encode()
        onward = kind == "intent" and not _way_out.get()
        if onward and wf in self._on_reserve:
            raise JournalError(f"the disk is full: the journal's reserve, released during "
                               f"{wf}, holds only its way out: {fields.get('step') or kind} "
                               f"is not done -> free space on {self.path.parent}")
        try:
            self._write_entry(line)
        except JournalError as exc:
            if exc.errno not in _FULL or not self._release():
                raise
            self._on_reserve.add(wf)
            if onward:
                raise
            self._write_entry(line)  # from the space the reserve freed
        return entry

    def _write_entry(self, line: bytes) -> None:
        created = not self.path.exists()
        try:
            private_dir(self.path.parent)
            fd = open_private(self.path, os.O_RDWR | os.O_APPEND)
        except OSError as exc:
            raise self._error(exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a crash tore the last line: never glue onto it
            try:
                _write_all(fd, line)
                os.fsync(fd)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # leave no partial entry behind
                    os.fsync(fd)
                raise self._error(exc) from None
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.path.parent)

    def _error(self, exc: OSError) -> JournalError:
        if isinstance(exc, NotPrivate):  # it names the path and the fix itself
            error = JournalError(f"cannot write the journal: {exc}; refusing to act "
                                 f"without a durable record")
            error.errno = exc.errno
            return error
        fix = _FIXES.get(exc.errno or 0, "check the file and its filesystem")
        error = JournalError(f"cannot write the journal {self.path} ({exc.strerror or exc}): "
                             f"{fix}; refusing to act without a durable record")
        error.errno = exc.errno
        return error

    def entries(self, since: float | None = None) -> list[Entry]:
        """Every readable entry in file order; a torn, foreign or absurd line is
        skipped (and named in `skipped`)."""
        return [e for e in self._read() if since is None or e.t >= since]

    def _read(self) -> Iterator[Entry]:
        self.skipped = []
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"cannot read the journal {self.path} "
                               f"({exc.strerror or exc})") from None
        for number, raw in enumerate(data.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw, parse_constant=_refuse_constant)
                yield Entry.from_json(obj)
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                reason = "not a journal entry" if isinstance(exc, KeyError | TypeError) \
                    else redact(str(exc))[:80]
                self.skipped.append(f"line {number}: {reason}")
                if self.skipped[-1] not in self._warned:  # once per line, not per read
                    self._warned.add(self.skipped[-1])
                    log.warning("journal %s: line %d skipped: %s", self.path, number, reason)
                continue

    def workflows(self, since: float | None = None) -> list[WorkflowRecord]:
        return fold(self.entries(since))

    def unfinished(self) -> list[WorkflowRecord]:
        return [w for w in self.workflows() if not w.finished]


def fold(entries: list[Entry]) -> list[WorkflowRecord]:
    """Group entries into workflows (in the order they began)."""
    begun: dict[str, Entry] = {}
    steps: dict[str, list[StepRecord]] = {}
    ends: dict[str, Entry] = {}
    for e in entries:
        if e.kind == "begin":
            begun[e.wf] = e
            steps[e.wf] = []
        elif e.kind == "intent" and e.wf in steps:
            steps[e.wf].append(StepRecord(e.step, e.target, e.action, e.t, None))
        elif e.kind == "outcome" and e.wf in steps:
            lst = steps[e.wf]
            for i in range(len(lst) - 1, -1, -1):
                s = lst[i]
                if s.step == e.step and s.target == e.target and s.ok is None:
                    lst[i] = StepRecord(s.step, s.target, s.action, s.started_at, bool(e.ok),
                                        e.message, e.detail, e.t)
                    break
        elif e.kind == "end":
            ends[e.wf] = e
    out = []
    for wf, b in begun.items():
        end = ends.get(wf)
        out.append(WorkflowRecord(
            wf=wf, workflow=b.workflow, target=b.target, began_at=b.t, detail=b.detail,
            steps=tuple(steps[wf]), ended_at=end.t if end else None,
            ok=end.ok if end else None, message=end.message if end else "",
            end_detail=end.detail if end else {}, clock=b.clock,
            end_clock=end.clock if end else "",
        ))
    return out


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data`: a short write is continued, a write of nothing is an error."""
    view = memoryview(data)
    while view:
        n = _write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "the write made no progress")
        view = view[n:]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a journal holds")


def _finite(value: Any) -> Any:
    """`value` with every non-finite float written as a string (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
