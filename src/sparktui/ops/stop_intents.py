"""Stops journaled by any process: a lane watcher asks here before it takes
a rank's exit, or a fatal line, for the lane's failure.

``sparktui stop`` run from a shell, a serve that gives up, a power-off: each
stops a rank with ``stop_command`` inside a journaled step, and the step's
intent is fsynced before the command is sent (ops/workflows/runner.py). So by
the time a console's watcher sees a container go down, the intent is on
disk, whichever process wrote it; the in-process path
(``LaneWatchers.stopping``) needs no journal. The journal is read
incrementally: one ``stat`` per question, only the new bytes when it grew.

Which boot a stop is about is decided by container identity and journal
order, never by time: the journal is stamped on this host's clock, the
containers on their node's (the simulator's, in a demo), and comparing the
two made an earlier boot's stop of the same names re-label a new serve
``stopping`` for good. A stop counts when it was journaled after the last
journaled start (``docker run --name C``) of one of the containers, and its
workflow either ended or is still running: a stop whose process died
(``kill -9``, the pid and its start time in its ``begin``: a reused pid is not
it) before its end stops nothing and is stale.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from sparktui.ops.journal import Entry, Journal
from sparktui.ops.runlocks import process_alive
from sparktui.ops.workflows.stop import stop_command

log = logging.getLogger(__name__)


def started_container(action: str) -> str | None:
    """The container a journaled ``docker run ... --name C ...`` starts."""
    if not action.startswith("docker run "):
        return None
    try:
        words = shlex.split(action)
    except ValueError:
        return None
    at = words.index("--name") + 1 if "--name" in words else 0
    return words[at] if 0 < at < len(words) else None


class StopIntents:
    """The journal's stop intents, by the command each one sends."""

    def __init__(self, journal: Journal) -> None:
        self.path: Path = journal.path
        self._file: tuple[int, int] | None = None
        """(device, inode) of the file read so far: a new journal is read anew."""
        self._offset = 0
        self._seq = 0
        self._intents: dict[str, list[tuple[int, str]]] = {}
        """By stop command: (journal position, workflow id) of each intent."""
        self._started: dict[str, int] = {}
        """By container: the journal position of its latest journaled start."""
        self._pids: dict[str, tuple[int, float | None]] = {}
        """By workflow: the pid (and its start time) that ran it."""
        self._ended: dict[str, int] = {}
        """By workflow: the journal position of its end."""

    def __call__(self, containers: Iterable[str], since: int = -1) -> bool:
        """Is a stop of one of ``containers`` journaled after its last journaled
        start, by a workflow that ended or whose process is alive, and not one
        that was over already at journal position ``since`` (see `from_now`)?"""
        self._refresh()
        return any(seq > self._started.get(c, -1) and self._alive(wf)
                   and not (seq <= since and self._ended.get(wf, since + 1) <= since)
                   for c in containers for seq, wf in self._intents.get(stop_command(c), ()))

    def from_now(self) -> Callable[[Sequence[str]], bool]:
        """The same question for a watch that begins now: a stop that had ended
        before it began is an earlier boot's, even when this boot's containers
        were started without a journaled ``docker run`` (by hand, or by another
        tool) under the same names. A stop still running now counts."""
        self._refresh()
        since = self._seq
        return lambda containers: self(containers, since)

    def _alive(self, wf: str) -> bool:
        if wf in self._ended or wf not in self._pids:
            return True  # ended (its stop happened), or of a writer that names no pid
        return process_alive(*self._pids[wf])

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._reset(None)
            return
        except OSError as exc:  # unreadable now: what was read still holds
            log.warning("journal %s: cannot stat: %s", self.path, exc)
            return
        ident = (st.st_dev, st.st_ino)
        if ident != self._file or st.st_size < self._offset:
            self._reset(ident)
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
            self._seq += 1
            if entry.kind == "begin" and isinstance(pid := entry.detail.get("pid"), int):
                started = entry.detail.get("pid_started")
                self._pids[entry.wf] = (pid, started if isinstance(started, float) else None)
            elif entry.kind == "end":
                self._ended[entry.wf] = self._seq
            elif entry.kind == "intent" and entry.action:
                if (started := started_container(entry.action)) is not None:
                    self._started[started] = self._seq
                else:
                    self._intents.setdefault(entry.action, []).append((self._seq, entry.wf))

    def _reset(self, ident: tuple[int, int] | None) -> None:
        self._file, self._offset, self._seq = ident, 0, 0
        self._intents, self._started, self._pids, self._ended = {}, {}, {}, {}
