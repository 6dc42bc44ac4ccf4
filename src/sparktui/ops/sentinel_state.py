"""What a running sentinel last saw working: ``<state_dir>/sentinel/last_good.json``
holds, per node and lane, the time (epoch s) of its last good sample, so a
one-shot ``sparktui health`` run while a node is dark can say how long ago it
last answered (a fresh process has no history of its own).

Written atomically (ops/files.py), 0600 in a 0700 dir (ops/private.py), by
the sentinel; read by anyone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from sparktui.ops.files import replace_file
from sparktui.ops.private import FILE_MODE, private_dir

FILE = Path("sentinel") / "last_good.json"


@dataclass(frozen=True)
class LastGood:
    pid: int
    written_at: float
    nodes: dict[str, float] = field(default_factory=dict)
    lanes: dict[str, float] = field(default_factory=dict)


def path_in(state_dir: Path) -> Path:
    return state_dir / FILE


def write(state_dir: Path, state: LastGood) -> None:
    private_dir(state_dir, *FILE.parent.parts)
    replace_file(path_in(state_dir), json.dumps({
        "pid": state.pid, "written_at": state.written_at,
        "nodes": state.nodes, "lanes": state.lanes}) + "\n", FILE_MODE)


def read(state_dir: Path) -> LastGood | None:
    """The live sentinel's record; None when there is none, it is unreadable,
    or the sentinel that wrote it is gone (its times would only grow stale)."""
    try:
        data = json.loads(path_in(state_dir).read_text())
        state = LastGood(int(data["pid"]), float(data["written_at"]),
                         {str(k): float(v) for k, v in data.get("nodes", {}).items()},
                         {str(k): float(v) for k, v in data.get("lanes", {}).items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return state if psutil.pid_exists(state.pid) else None


def remove(state_dir: Path) -> None:
    path_in(state_dir).unlink(missing_ok=True)
