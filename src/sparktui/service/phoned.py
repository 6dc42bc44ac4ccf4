"""The phone's memory on disk: ``<state_dir>/phone.json`` holds what the night
desk's `NotifyPolicy` must not forget when its process dies (`PhoneMemory`:
the incidents messaged and not over, the dedup window, the hourly count), so
a sentinel restarted by systemd, or after ``kill -9``, does not phone an
incident that is still open a second time.

Written (temp file, fsync, rename; 0600, never through a symlink) before a
message is handed to Home Assistant: a process killed mid-call has already
remembered it. It is the one truth of every desk that phones from the state
dir: a console watching alone and a sentinel just started (both phone until
the console attaches, up to its 60 s backoff) each read it, decide and write
it back under `locked`, so whichever phones an incident first wins and the
other reads that the message went. Each entry says which clock its time is
on, so two desks on two clocks (a demo's console beside a wall-clock
sentinel) share the incidents and keep each its own dedup window and
hourly count, and neither compares the other's times with its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from sparktui.core.notify import PhoneMemory
from sparktui.ops.files import replace_file
from sparktui.ops.private import open_private, private_dir

FILE = "phone.json"
LOCK_FILE = "phone.lock"
"""flock'd around a read, decision and write of FILE (which is replaced by a
rename, so it cannot carry the lock itself)."""


def path_in(state_dir: Path) -> Path:
    return state_dir / FILE


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """Held while a desk reads the memory, decides and writes it back (file
    I/O only, never the call to Home Assistant). OSError when the lock file
    cannot be opened (never through a symlink)."""
    private_dir(state_dir)
    fd = open_private(state_dir / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # drops the flock


def write(state_dir: Path, memory: PhoneMemory, clock: str) -> None:
    """``clock``: the clock ``memory``'s times are on (ops.journal.clock_of).
    Each entry is stamped with its clock. What another clock's desk wrote
    stays as it wrote it: its dedup window and hourly count, and an incident
    of its that this memory holds in the same state (open, or ending), which
    `read` had given this desk on this clock's ``now``."""
    opened = {(e, s) for e, s, _ in memory.open}
    ending = {(e, s) for e, s, _, _ in memory.ending}
    kept = [x for x in _entries(state_dir) if x.clock != clock and (
        x.kind in ("last", "sent")
        or (x.event, x.subject) in (opened if x.kind == "open" else ending))]
    held = {(x.kind, x.event, x.subject) for x in kept}
    ours = [*(_Entry("open", e, s, t, "", clock) for e, s, t in memory.open
              if ("open", e, s) not in held),
            *(_Entry("ending", e, s, t, why, clock) for e, s, t, why in memory.ending
              if ("ending", e, s) not in held),
            *(_Entry("last", e, s, t, "", clock) for e, s, t in memory.last),
            *(_Entry("sent", "", "", t, "", clock) for t in memory.sent)]
    data = json.dumps({"entries": [list(e) for e in ours + kept]}) + "\n"
    private_dir(state_dir)
    replace_file(path_in(state_dir), data, 0o600)


def read(state_dir: Path, clock: str, now: float) -> PhoneMemory:
    """The memory last written, or an empty one (none, unreadable, not a regular
    file). What was written on another clock (a demo's console beside a
    wall-clock sentinel) counts as far as it can: its open and ending
    incidents, as messaged or ended ``now`` (its times say nothing on ours);
    its dedup window and hourly count are its own."""
    entries = _entries(state_dir)
    mine = [e for e in entries if e.clock == clock]
    return PhoneMemory(
        open=tuple((e.event, e.subject, e.at if e.clock == clock else now)
                   for e in entries if e.kind == "open"),
        ending=tuple((e.event, e.subject, e.at if e.clock == clock else now, e.why)
                     for e in entries if e.kind == "ending"),
        last=tuple((e.event, e.subject, e.at) for e in mine if e.kind == "last"),
        sent=tuple(e.at for e in mine if e.kind == "sent"))


class _Entry(NamedTuple):
    kind: str
    """open, ending, last or sent (a `PhoneMemory` field)."""
    event: str
    subject: str
    at: float
    why: str
    clock: str


def _entries(state_dir: Path) -> list[_Entry]:
    """The file's entries; none when there is none, it is unreadable or not a
    regular file. A file of the first form (one ``clock`` for all) reads as
    entries on that clock."""
    try:
        fd = os.open(path_in(state_dir), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        with os.fdopen(os.dup(fd), "rb") as f:
            data = json.loads(f.read(1 << 20))
        if "entries" in data:
            return [_Entry(str(k), str(e), str(s), float(t), str(why), str(c))
                    for k, e, s, t, why, c in data["entries"]]
        c = str(data.get("clock", ""))
        return [*(_Entry("open", str(e), str(s), float(t), "", c) for e, s, t in data["open"]),
                *(_Entry("ending", str(e), str(s), float(t), str(why), c)
                  for e, s, t, why in data["ending"]),
                *(_Entry("last", str(e), str(s), float(t), "", c) for e, s, t in data["last"]),
                *(_Entry("sent", "", "", float(t), "", c) for t in data["sent"])]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    finally:
        os.close(fd)
