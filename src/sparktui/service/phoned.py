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
other reads that the message went.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from sparktui.core.notify import PhoneMemory
from sparktui.ops.files import replace_file

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
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / LOCK_FILE,
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # drops the flock


def write(state_dir: Path, memory: PhoneMemory, clock: str) -> None:
    """``clock``: the clock its times are on (ops.journal.clock_of)."""
    path = path_in(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    data = json.dumps({"clock": clock, "open": memory.open, "ending": memory.ending,
                       "last": memory.last, "sent": memory.sent}) + "\n"
    replace_file(path, data, 0o600)


def read(state_dir: Path, clock: str, now: float) -> PhoneMemory:
    """The memory last written, or an empty one (none, unreadable, not a regular
    file). Written on another clock (a demo's console beside a wall-clock
    sentinel): its open incidents only, as messaged ``now``; its times say
    nothing on ours."""
    try:
        fd = os.open(path_in(state_dir), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return PhoneMemory()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return PhoneMemory()
        with os.fdopen(os.dup(fd), "rb") as f:
            data = json.loads(f.read(1 << 20))
        opened = tuple((str(e), str(s), float(t)) for e, s, t in data["open"])
        if data.get("clock", "") != clock:
            return PhoneMemory(open=tuple((e, s, now) for e, s, _ in opened))
        return PhoneMemory(
            open=opened,
            ending=tuple((str(e), str(s), float(t), str(why))
                         for e, s, t, why in data["ending"]),
            last=tuple((str(e), str(s), float(t)) for e, s, t in data["last"]),
            sent=tuple(float(t) for t in data["sent"]))
    except (OSError, ValueError, KeyError, TypeError):
        return PhoneMemory()
    finally:
        os.close(fd)
