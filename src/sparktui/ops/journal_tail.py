"""The journal read as it grows, by one reader for a whole process.

`JournalTail.read` costs one ``stat`` when nothing was appended and reads
only the new bytes when the journal grew; a line still being written is read
once its newline is on disk. Each complete entry goes, in file order and
numbered (its position in the file, from 1), to every `TailReader`
subscribed: the stop intents a lane watcher asks about (ops/stop_intents.py)
and, in the sentinel, the workflows any process runs (`JournalWorkflows`),
told from the entries every workflow writes anyway (ops/workflows/runner.py).
A journal replaced (a new inode) or cut shorter than what was read is read
again from its start, after each reader is told (`TailReader.reset`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from sparktui.ops.events import (
    GuardsEvaluated,
    StepFinished,
    StepStarted,
    WorkflowEvent,
    WorkflowFinished,
    WorkflowStarted,
)
from sparktui.ops.journal import Entry

log = logging.getLogger(__name__)

UNFINISHED_NOTE = "left unfinished: "
"""How the runner's ``note`` opens when a workflow fails owing a step (a plug
left off): it writes no ``end`` then (resume finishes it), so this note is
the failure's only entry (ops/workflows/runner.py, ``WorkflowRun.__aexit__``)."""


class TailReader(Protocol):
    def entry(self, seq: int, entry: Entry) -> None:
        """The ``seq``-th readable entry of the journal (from 1)."""

    def reset(self, replaced: bool) -> None:
        """The journal is read again from its start: ``replaced`` when it is
        another file, else it was cut shorter than what was read."""


class JournalTail:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = 0
        """Readable entries read so far."""
        self._file: tuple[int, int] | None = None
        """(device, inode) of the file read so far."""
        self._offset = 0
        self._readers: list[TailReader] = []

    def subscribe(self, reader: TailReader, *, from_now: bool = False) -> None:
        """``reader`` hears every entry read from now on: the whole journal
        when nothing was read yet, unless ``from_now`` (then what is on disk
        already is read first, for the other readers, and not told to it)."""
        if from_now:
            self.read()
        self._readers.append(reader)

    def read(self) -> None:
        """Tell every reader the entries appended since the last read."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._file is not None or self._offset:
                self._reset(None, replaced=True)
            return
        except OSError as exc:  # unreadable now: what was read still holds
            log.warning("journal %s: cannot stat: %s", self.path, exc)
            return
        ident = (st.st_dev, st.st_ino)
        if ident != self._file or st.st_size < self._offset:
            self._reset(ident, replaced=ident != self._file and self._file is not None)
        if st.st_size == self._offset:
            return
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(st.st_size - self._offset)
        except OSError as exc:
            log.warning("journal %s: cannot read: %s", self.path, exc)
            return
        end = data.rfind(b"\n") + 1  # a line being written is read when complete
        self._offset += end
        for raw in data[:end].splitlines():
            try:
                entry = Entry.from_json(json.loads(raw))
            except (ValueError, KeyError, TypeError, RecursionError):
                continue  # a torn or foreign line (Journal.entries names it)
            self.seq += 1
            for reader in self._readers:
                reader.entry(self.seq, entry)

    def _reset(self, ident: tuple[int, int] | None, *, replaced: bool) -> None:
        self._file, self._offset, self.seq = ident, 0, 0
        for reader in self._readers:
            reader.reset(replaced)


class JournalWorkflows:
    """Workflow events told from the journal's entries, for workflows begun
    after it subscribed (`JournalTail.subscribe(..., from_now=True)`),
    whichever process runs them: ``begin`` -> `WorkflowStarted`, ``guards``
    -> `GuardsEvaluated`, ``intent`` -> `StepStarted`, ``outcome`` ->
    `StepFinished`, ``end`` (or the runner's "left unfinished" note) ->
    `WorkflowFinished`. A step's progress is not journaled, so not told.

    After the journal was cut shorter, what was told already is not told
    again (entries up to the last position told); a replaced journal is
    another file, told from its start."""

    def __init__(self, emit: Callable[[WorkflowEvent], None]) -> None:
        self._emit = emit
        self._running: dict[str, tuple[str, str]] = {}
        """By workflow id: (kind, target) of each workflow begun and not ended."""
        self._steps: dict[tuple[str, str, str], float] = {}
        """By (wf, step, target): when the step's intent was written."""
        self._failed: dict[str, str] = {}
        """By workflow: its latest failed step, as the runner says it."""
        self._told = 0
        self._skip_through = 0

    def reset(self, replaced: bool) -> None:
        self._skip_through = 0 if replaced else self._told
        if replaced:
            self._running.clear()
            self._steps.clear()
            self._failed.clear()

    def entry(self, seq: int, entry: Entry) -> None:
        if seq <= self._skip_through:
            return
        self._told = seq
        if entry.kind == "begin":
            self._running[entry.wf] = (entry.workflow, entry.target)
        elif entry.wf not in self._running:
            return  # begun before this reader came (or not a workflow's)
        try:
            event = self._event(entry)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("journal entry of %s not told: %r", entry.wf, exc)
            return
        if event is not None:
            self._emit(event)

    def _event(self, e: Entry) -> WorkflowEvent | None:
        if e.kind == "begin":
            plan = e.detail.get("plan") or []
            return WorkflowStarted(e.wf, e.t, e.workflow, e.target, tuple(
                f"{p['step']} [{p['target']}]: {p['action']}" for p in plan))
        if e.kind == "guards":
            verdicts: list[dict[str, Any]] = list(e.detail.get("verdicts") or [])

            def said(ok: Callable[[dict[str, Any]], bool]) -> tuple[str, ...]:
                return tuple(str(v.get("message", "")) for v in verdicts if ok(v))

            return GuardsEvaluated(
                e.wf, e.t,
                passed=said(lambda v: bool(v.get("passed")) and not v.get("warning")),
                refused=said(lambda v: not v.get("passed") and not v.get("overridden")),
                overridden=said(lambda v: bool(v.get("overridden"))),
                warnings=said(lambda v: bool(v.get("warning"))))
        if e.kind == "intent":
            self._steps[(e.wf, e.step, e.target)] = e.t
            return StepStarted(e.wf, e.t, e.step, e.target, e.action)
        if e.kind == "outcome":
            began = self._steps.pop((e.wf, e.step, e.target), e.t)
            if not e.ok:
                self._failed[e.wf] = f"{e.step} [{e.target}]: {e.message}"
            return StepFinished(e.wf, e.t, e.step, e.target, bool(e.ok), e.message,
                                max(0.0, e.t - began))
        if e.kind == "end" or (e.kind == "note" and e.message.startswith(UNFINISHED_NOTE)):
            kind, target = self._running.pop(e.wf)
            self._steps = {k: t for k, t in self._steps.items() if k[0] != e.wf}
            failed = self._failed.pop(e.wf, "")
            if e.kind == "end":
                return WorkflowFinished(e.wf, e.t, kind, target, bool(e.ok), e.message,
                                        dict(e.detail))
            owed = e.message.removeprefix(UNFINISHED_NOTE)
            why = f"{failed}; " if failed else ""
            return WorkflowFinished(e.wf, e.t, kind, target, False, f"{why}UNFINISHED: {owed}",
                                    {"unfinished": owed.split("; ")})
        return None
