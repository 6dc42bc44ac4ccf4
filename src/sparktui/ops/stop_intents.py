"""Stops journaled by any process: a lane watcher asks here before it takes
a rank's exit, or a fatal line, for the lane's failure.

``sparktui stop`` run from a shell, a serve that gives up, a power-off: each
stops a rank with ``stop_command`` inside a journaled step, and the step's
intent is fsynced before the command is sent (ops/workflows/runner.py). So by
the time a console's watcher sees a container go down, the intent is on
disk, whichever process wrote it; the in-process path
(``LaneWatchers.stopping``) needs no journal. The journal is read
incrementally: one ``stat`` per question, only the new bytes when it grew.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from sparktui.ops.journal import Entry, Journal
from sparktui.ops.workflows.stop import stop_command

log = logging.getLogger(__name__)


class StopIntents:
    """The journal's stop intents, by the command each one sends."""

    def __init__(self, journal: Journal) -> None:
        self.path: Path = journal.path
        self._file: tuple[int, int] | None = None
        """(device, inode) of the file read so far: a new journal is read anew."""
        self._offset = 0
        self._intents: dict[str, list[float]] = {}

    def since(self, containers: Iterable[str], after: float) -> float | None:
        """When a stop of one of ``containers`` was first journaled at or after
        ``after`` (epoch seconds: the boot's start, so an earlier boot's stop
        of the same container names does not count); None when none was."""
        self._refresh()
        times = [t for c in containers for t in self._intents.get(stop_command(c), ())
                 if t >= after]
        return min(times, default=None)

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._file, self._offset, self._intents = None, 0, {}
            return
        except OSError as exc:  # unreadable now: what was read still holds
            log.warning("journal %s: cannot stat: %s", self.path, exc)
            return
        ident = (st.st_dev, st.st_ino)
        if ident != self._file or st.st_size < self._offset:
            self._file, self._offset, self._intents = ident, 0, {}
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
            if entry.kind == "intent" and entry.action:
                self._intents.setdefault(entry.action, []).append(entry.t)
