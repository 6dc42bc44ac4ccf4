"""The audit journal: append-only JSONL in the state dir, fsynced per entry.

Each workflow writes ``begin``, then for each step an ``intent`` (before the
step acts) and an ``outcome`` (after), then ``end``. Every entry is one line
written with a single ``write`` on an ``O_APPEND`` descriptor under an
exclusive ``flock`` and ``fsync``ed before the step goes on, so a crash at any
point loses nothing that happened: at worst the last line is torn, and the
reader skips a line that is not valid JSON. A workflow with a ``begin`` and no
``end`` is *unfinished* and offered at the next start (a power cycle whose
plug went off and never came back on).

Entry fields: ``t`` (epoch s), ``wf`` (workflow id), ``kind`` (begin, intent,
outcome, end, refused, override, note), ``workflow`` (serve, stop,
power-cycle ...), ``target``, and per kind ``step``, ``action``, ``ok``,
``message``, ``detail``. Secrets never go in: the HA token is not known here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparktui.core.clock import Clock, SystemClock

JOURNAL_FILE = "journal.jsonl"


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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": round(self.t, 3), "wf": self.wf, "kind": self.kind}
        for key in ("workflow", "target", "step", "action", "message"):
            if value := getattr(self, key):
                out[key] = value
        if self.ok is not None:
            out["ok"] = self.ok
        if self.detail:
            out["detail"] = self.detail
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        return cls(
            t=float(data["t"]), wf=str(data["wf"]), kind=str(data["kind"]),
            workflow=str(data.get("workflow", "")), target=str(data.get("target", "")),
            step=str(data.get("step", "")), action=str(data.get("action", "")),
            ok=data.get("ok"), message=str(data.get("message", "")),
            detail=dict(data.get("detail") or {}),
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

    @property
    def finished(self) -> bool:
        return self.ended_at is not None

    @property
    def in_doubt(self) -> tuple[StepRecord, ...]:
        return tuple(s for s in self.steps if s.ok is None)

    def done(self, step: str, target: str | None = None) -> bool:
        return any(s.step == step and s.ok and (target is None or s.target == target)
                   for s in self.steps)

    def describe(self) -> str:
        parts = [f"{self.workflow} {self.target} ({self.wf}) began "
                 f"{_hhmm(self.began_at)} and never ended"]
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

    @classmethod
    def in_state_dir(cls, state_dir: Path, clock: Clock | None = None) -> Journal:
        return cls(state_dir / JOURNAL_FILE, clock)

    def append(self, wf: str, kind: str, **fields: Any) -> Entry:
        """Write one entry and fsync it before returning."""
        entry = Entry(t=self.clock.time(), wf=wf, kind=kind, **fields)
        line = (json.dumps(entry.to_json(), separators=(",", ":"), default=str) + "\n").encode()
        created = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a crash tore the last line: never glue onto it
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.path.parent)
        return entry

    def entries(self, since: float | None = None) -> list[Entry]:
        """Every readable entry in file order; a torn or foreign line is skipped."""
        return [e for e in self._read() if since is None or e.t >= since]

    def _read(self) -> Iterator[Entry]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        for raw in data.splitlines():
            try:
                obj = json.loads(raw)
                yield Entry.from_json(obj)
            except (ValueError, KeyError, TypeError):
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
                                        e.message, e.detail)
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
            end_detail=end.detail if end else {},
        ))
    return out


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
