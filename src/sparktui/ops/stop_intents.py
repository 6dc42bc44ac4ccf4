"""Stops journaled by any process: a lane watcher asks here before it takes
a rank's exit, or a fatal line, for the lane's failure.

``sparktui stop`` run from a shell, a serve that gives up, a power-off: each
stops a rank with ``stop_command`` inside a journaled step, and the step's
intent is fsynced before the command is sent (ops/workflows/runner.py). So by
the time a console's watcher sees a container go down, the intent is on
disk, whichever process wrote it; the in-process path
(``LaneWatchers.stopping``) needs no journal. The journal is read
incrementally (ops/journal_tail.py): one ``stat`` per question, only the new
bytes when it grew.

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

import shlex
from collections.abc import Callable, Iterable, Sequence

from sparktui.ops.journal import Entry, Journal
from sparktui.ops.journal_tail import JournalTail
from sparktui.ops.runlocks import process_alive
from sparktui.ops.workflows.stop import stop_command


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
    """The journal's stop intents, by the command each one sends. Read through
    ``tail`` (the process's one reader of the journal, ops/journal_tail.py;
    its own when none is given), subscribed before it reads anything."""

    def __init__(self, journal: Journal, tail: JournalTail | None = None) -> None:
        self._tail = tail or JournalTail(journal.path)
        self._intents: dict[str, list[tuple[int, str]]] = {}
        """By stop command: (journal position, workflow id) of each intent."""
        self._started: dict[str, int] = {}
        """By container: the journal position of its latest journaled start."""
        self._pids: dict[str, tuple[int, float | None]] = {}
        """By workflow: the pid (and its start time) that ran it."""
        self._ended: dict[str, int] = {}
        """By workflow: the journal position of its end."""
        self._tail.subscribe(self)

    def __call__(self, containers: Iterable[str], since: int = -1) -> bool:
        """Is a stop of one of ``containers`` journaled after its last journaled
        start, by a workflow that ended or whose process is alive, and not one
        that was over already at journal position ``since`` (see `from_now`)?"""
        self._tail.read()
        return any(seq > self._started.get(c, -1) and self._alive(wf)
                   and not (seq <= since and self._ended.get(wf, since + 1) <= since)
                   for c in containers for seq, wf in self._intents.get(stop_command(c), ()))

    def from_now(self) -> Callable[[Sequence[str]], bool]:
        """The same question for a watch that begins now: a stop that had ended
        before it began is an earlier boot's, even when this boot's containers
        were started without a journaled ``docker run`` (by hand, or by another
        tool) under the same names. A stop still running now counts."""
        self._tail.read()
        since = self._tail.seq
        return lambda containers: self(containers, since)

    def _alive(self, wf: str) -> bool:
        if wf in self._ended or wf not in self._pids:
            return True  # ended (its stop happened), or of a writer that names no pid
        return process_alive(*self._pids[wf])

    def entry(self, seq: int, entry: Entry) -> None:
        if entry.kind == "begin" and isinstance(pid := entry.detail.get("pid"), int):
            started = entry.detail.get("pid_started")
            self._pids[entry.wf] = (pid, started if isinstance(started, float) else None)
        elif entry.kind == "end":
            self._ended[entry.wf] = seq
        elif entry.kind == "intent" and entry.action:
            if (started := started_container(entry.action)) is not None:
                self._started[started] = seq
            else:
                self._intents.setdefault(entry.action, []).append((seq, entry.wf))

    def reset(self, replaced: bool) -> None:
        self._intents, self._started, self._pids, self._ended = {}, {}, {}, {}
