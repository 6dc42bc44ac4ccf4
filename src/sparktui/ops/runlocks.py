"""Runlocks: one workflow per node at a time, persisted in the state dir.

A lock is one JSON file per node (``<state>/runlocks/<node>.json``) created
with ``O_CREAT | O_EXCL``, so two processes cannot both take a node; a
workflow takes all its nodes or none. A lock names its owner (workflow id,
pid, host) and the containers it starts, so ``runlock list`` can report it
*stale* when the owner process is gone and none of its containers runs (a
crashed serve), and ``runlock close`` can remove it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

RUNLOCK_DIR = "runlocks"


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

    def describe(self) -> str:
        return f"{self.workflow} {self.target} ({self.wf}, pid {self.pid} on {self.host})"

    def advice(self, alive: bool | None) -> str:
        """What the operator should do about this lock, given whether its owner
        process is alive (`owner_alive`): wait only for a live owner; a dead
        owner's lock is stale, closed after stopping the containers it started."""
        close = f"`sparktui runlock close {self.node}`"
        if alive is not False:
            where = "" if alive else f" (taken on {self.host}: check there)"
            return f"-> wait for it{where}, or {close} if it is stale"
        gone = f"its process (pid {self.pid}) is gone: the lock is stale"
        if self.containers:
            return (f"{gone}, but it started {', '.join(self.containers)} (may still run) -> "
                    f"`sparktui stop {self.target}`, then {close}")
        return f"{gone} -> {close}"

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["containers"] = list(self.containers)
        return out


def owner_alive(lock: RunLock, host: str | None = None) -> bool | None:
    """True/False for a lock taken on this host; None when taken elsewhere."""
    if lock.host != (host or socket.gethostname()):
        return None
    return psutil.pid_exists(lock.pid)


def is_stale(lock: RunLock, alive: bool | None, running: set[str] | None) -> bool | None:
    """Stale when the owner is gone and none of its containers runs; None when
    either is unknown (another host's lock, the node did not answer)."""
    if alive is None:
        return None
    if alive:
        return False
    if not lock.containers:
        return True
    if running is None:
        return None
    return not any(c in running for c in lock.containers)


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
                pid: int | None = None) -> list[RunLock]:
        """Lock every node or none; LockHeld names the first node already taken."""
        self.dir.mkdir(parents=True, exist_ok=True)
        taken: list[RunLock] = []
        try:
            for node in nodes:
                lock = RunLock(node, wf, workflow, target, pid or os.getpid(),
                               socket.gethostname(), started_at,
                               tuple((containers or {}).get(node, ())))
                try:
                    fd = os.open(self._path(node), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except FileExistsError:
                    held = self.get(node)
                    raise LockHeld(held or lock) from None
                with os.fdopen(fd, "w") as f:
                    json.dump(lock.to_json(), f)
                    f.flush()
                    os.fsync(f.fileno())
                taken.append(lock)
        except BaseException:
            for lock in taken:
                self._remove(lock.node, wf)
            raise
        return taken

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
            return RunLock(**data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            # an unreadable lock still holds the node: report it as held by "?"
            return RunLock(node, "?", "unreadable", str(self._path(node)), 0, "?", 0.0)

    def list(self) -> list[RunLock]:
        if not self.dir.is_dir():
            return []
        out = []
        for path in sorted(self.dir.glob("*.json")):
            lock = self.get(path.stem)
            if lock is not None:
                out.append(lock)
        return out

    def holders(self, exclude_wf: str | None = None) -> dict[str, str]:
        """node -> who holds it and what to do about it, for the runlock guard."""
        return {lock.node: f"{lock.describe()}; {lock.advice(owner_alive(lock))}"
                for lock in self.list() if lock.wf != exclude_wf}
