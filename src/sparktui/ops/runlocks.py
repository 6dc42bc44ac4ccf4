"""Runlocks: one workflow per node at a time, persisted in the state dir.

A lock is one JSON file per node (``<state>/runlocks/<node>.json``) created
with ``O_CREAT | O_EXCL``, so two processes cannot both take a node; a
workflow takes all its nodes or none. A lock names its owner (workflow id,
pid and the pid's start time, host) and the containers it starts.

A lock whose owner process is gone (``kill -9``, a crash) is *stale*: it
holds nothing. ``runlock list`` and the console show it with its pid and age,
no guard refuses on it, and the next workflow on its node takes it over
(`RunLocks.acquire`). The containers it started may still run: that is the
node's state, read and guarded from the node (the stale-container and
node-busy guards), not from the lock. A pid is "the owner" only while the
process with that pid is the one that took the lock: its start time
(``pid_started``, psutil's ``create_time``) must match, so a pid reused by a
later process does not keep a dead workflow's lock alive. Locks written
before ``pid_started`` existed are judged by the pid alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from sparktui.ops.private import open_private, private_dir

RUNLOCK_DIR = "runlocks"
TAKEOVER_FILE = ".takeover"
"""flock'd while a stale lock is replaced, so two workflows cannot both take it."""
PID_START_TOLERANCE_S = 1.0
"""How far a pid's start time may read from the recorded one and still be the
same process (psutil derives it from boot time and clock ticks: stable to the
tick; a reused pid starts later by far more)."""


def process_started(pid: int) -> float | None:
    """When process ``pid`` started (psutil ``create_time``), None if it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def process_alive(pid: int, started: float | None) -> bool:
    """Is the process that had ``pid`` and started at ``started`` still running?
    A zombie is gone; a pid now held by a process that started at another time
    is a reused pid, not the owner (``started`` None: not recorded, the pid alone)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        now = proc.create_time()
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # access denied: it exists, its start time unknown
        return psutil.pid_exists(pid)
    return started is None or abs(now - started) <= PID_START_TOLERANCE_S


class LockHeld(Exception):
    def __init__(self, lock: RunLock) -> None:
        self.lock = lock
        super().__init__(f"{lock.node} is locked by {lock.describe()}")


@dataclass(frozen=True)
class RunLock:
    node: str
    wf: str
    workflow: str
    target: str
    pid: int
    host: str
    started_at: float
    containers: tuple[str, ...] = ()
    pid_started: float | None = None
    """The owner process's start time (psutil ``create_time``): tells the owner
    from a later process given the same pid. None in locks written before it."""

    def describe(self) -> str:
        return f"{self.workflow} {self.target} ({self.wf}, pid {self.pid} on {self.host})"

    def stale_note(self, age_s: float | None) -> str:
        """A stale lock as the operator reads it: whose, its pid, its age, and
        that it holds nothing."""
        age = "" if age_s is None else f", taken {format_age(age_s)} ago"
        started = (f"; it started {', '.join(self.containers)} (may still run: "
                   f"`sparktui stop {self.target}` stops it)" if self.containers else "")
        return (f"STALE: {self.describe()}: pid {self.pid} is gone{age}; it holds nothing "
                f"(the next workflow on {self.node} takes it over){started}")

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["containers"] = list(self.containers)
        return out


def format_age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def owner_alive(lock: RunLock, host: str | None = None) -> bool | None:
    """True/False for a lock taken on this host; None when taken elsewhere."""
    if lock.host != (host or socket.gethostname()):
        return None
    return process_alive(lock.pid, lock.pid_started)


class RunLocks:
    def __init__(self, directory: Path) -> None:
        self.dir = directory

    @classmethod
    def in_state_dir(cls, state_dir: Path) -> RunLocks:
        return cls(state_dir / RUNLOCK_DIR)

    def _path(self, node: str) -> Path:
        if not node or "/" in node or node.startswith("."):
            raise ValueError(f"not a node name: {node!r}")
        return self.dir / f"{node}.json"

    def acquire(self, nodes: Sequence[str], *, wf: str, workflow: str, target: str,
                started_at: float, containers: Mapping[str, Sequence[str]] | None = None,
                pid: int | None = None,
                on_stale: Callable[[RunLock, float | None], None] | None = None
                ) -> list[RunLock]:
        """Lock every node or none; LockHeld names the first node held by a live
        owner (or one on another host, or an unreadable lock). A stale lock (its
        owner on this host gone) is taken over; ``on_stale`` is told each one, with
        its age in seconds."""
        private_dir(self.dir.parent, self.dir.name)
        owner = pid or os.getpid()
        taken: list[RunLock] = []
        try:
            for node in nodes:
                lock = RunLock(node, wf, workflow, target, owner, socket.gethostname(),
                               started_at, tuple((containers or {}).get(node, ())),
                               process_started(owner))
                if not self._create(lock):
                    held = self.get(node)
                    age = self.age(node, time.time())
                    if held is None or owner_alive(held) is not False \
                            or not self._take_over(held, lock):
                        raise LockHeld(held or lock)
                    if on_stale is not None:
                        on_stale(held, age)
                taken.append(lock)
        except BaseException:
            for lock in taken:
                self._remove(lock.node, wf)
            raise
        return taken

    def _create(self, lock: RunLock) -> bool:
        try:
            fd = open_private(self._path(lock.node), os.O_WRONLY | os.O_EXCL)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump(lock.to_json(), f)
            f.flush()
            os.fsync(f.fileno())
        return True

    def _take_over(self, stale: RunLock, lock: RunLock) -> bool:
        """Replace ``stale`` by ``lock``, unless the file changed meanwhile (another
        workflow took it over first): under the take-over flock, so one wins."""
        with self._takeover():
            if self.get(lock.node) != stale:
                return False
            with contextlib.suppress(FileNotFoundError):
                self._path(lock.node).unlink()
            return self._create(lock)

    @contextlib.contextmanager
    def _takeover(self) -> Iterator[None]:
        fd = open_private(self.dir / TAKEOVER_FILE, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # drops the flock

    def release(self, wf: str, nodes: Sequence[str] | None = None) -> list[str]:
        """Remove the locks ``wf`` holds (on ``nodes``, or all); returns the nodes freed."""
        freed = []
        for lock in self.list():
            if lock.wf == wf and (nodes is None or lock.node in nodes) \
                    and self._remove(lock.node, wf):
                freed.append(lock.node)
        return freed

    def _remove(self, node: str, wf: str | None) -> bool:
        held = self.get(node)
        if held is None or (wf is not None and held.wf != wf):
            return False
        with contextlib.suppress(FileNotFoundError):
            self._path(node).unlink()
            return True
        return False

    def close(self, node: str) -> RunLock | None:
        """Remove ``node``'s lock whoever holds it (the operator's decision)."""
        held = self.get(node)
        if held is not None:
            self._remove(node, held.wf)
        return held

    def get(self, node: str) -> RunLock | None:
        try:
            data = json.loads(self._path(node).read_text())
            data["containers"] = tuple(data.get("containers", ()))
            known = {f.name for f in dataclasses.fields(RunLock)}
            # a later version's extra field does not make the lock unreadable
            return RunLock(**{k: v for k, v in data.items() if k in known})
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, AttributeError):
            # an unreadable lock still holds the node: report it as held by "?"
            return RunLock(node, "?", "unreadable", str(self._path(node)), 0, "?", 0.0)

    def age(self, node: str, now: float) -> float | None:
        """Seconds since ``node``'s lock was written, on the wall clock ``now``
        (its file's mtime: a lock's ``started_at`` is on its workflow's clock,
        the simulator's in a demo)."""
        try:
            return now - self._path(node).stat().st_mtime
        except OSError:
            return None

    def lines(self, now: float) -> list[str]:
        """Every lock in one line each, as `runlock list` and the console show them:
        a stale one with its pid and age (``now``: the wall clock)."""
        return [lock_line(lock, owner_alive(lock), self.age(lock.node, now))
                for lock in self.list()]

    def list(self) -> list[RunLock]:
        if not self.dir.is_dir():
            return []
        out = []
        for path in sorted(self.dir.glob("*.json")):
            lock = self.get(path.stem)
            if lock is not None:
                out.append(lock)
        return out


def lock_line(lock: RunLock, alive: bool | None, age_s: float | None) -> str:
    if alive is False:
        return f"{lock.node}: {lock.stale_note(age_s)}"
    mark = "held" if alive else f"unknown (taken on {lock.host}: check there)"
    age = "" if age_s is None else f", taken {format_age(age_s)} ago"
    return f"{lock.node}: {mark}: {lock.describe()}{age}"
