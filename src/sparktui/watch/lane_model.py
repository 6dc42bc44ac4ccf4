"""What one lane's watch says and holds (watch/lane.py): the events it
tells its subscribers (phase, lines, fatal, exit, memory, endpoint, stop,
end), its verdicts, and the state it keeps per rank."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from sparktui.core.failure import Failure
from sparktui.core.logsig import (
    LogEvent,
    Phase,
)
from sparktui.core.oomkill import OomKill
from sparktui.watch.follower import (
    LogFollower,
    LogLine,
)
from sparktui.watch.readiness import (
    RankContainer,
    WaitResult,
)


class Verdict(StrEnum):
    READY = "ready"
    FAILED = "failed"
    STALLED = "stalled"
    STOPPED = "stopped"


@dataclass(frozen=True)
class LaneEvent:
    lane: str


@dataclass(frozen=True)
class PhaseChanged(LaneEvent):
    phase: Phase
    summary: str


@dataclass(frozen=True)
class LinesArrived(LaneEvent):
    rank: int
    node: str
    lines: tuple[LogLine, ...]
    events: tuple[LogEvent | None, ...]
    """What each line means (core/logsig), classified once for every consumer."""
    delivered: int
    """Lines of that rank delivered so far (the console's buffer index)."""


@dataclass(frozen=True)
class BarRedrawn(LaneEvent):
    """A load bar's redraw read before its line ended (watch/follower.OpenLine):
    the tracker's load progress moved."""

    rank: int
    node: str


@dataclass(frozen=True)
class FatalDecided(LaneEvent):
    failure: Failure


@dataclass(frozen=True)
class RankExited(LaneEvent):
    rank: int
    node: str
    exit_code: int | None
    oom_killed: bool


@dataclass(frozen=True)
class MemoryRead(LaneEvent):
    """MemAvailable of a rank's node while the lane boots (OOM prediction)."""

    node: str
    available_kib: int


@dataclass(frozen=True)
class EndpointChecked(LaneEvent):
    health: str
    decode_tps: float | None
    metrics: Mapping[str, float]
    """The engine's ``/metrics`` samples (empty when it did not answer)."""


@dataclass(frozen=True)
class Stopping(LaneEvent):
    """The lane is being stopped by us (``ended``: every rank has exited)."""

    ended: bool


@dataclass(frozen=True)
class WatchEnded(LaneEvent):
    result: WaitResult


Subscriber = Callable[[LaneEvent], None]
StopIntent = Callable[[Sequence[str]], bool]
"""(the lane's containers, the boot's start) -> when a stop of one of them
was journaled since, by any process; None when none was."""


@dataclass
class RankState:
    rc: RankContainer
    follower: LogFollower | None = None
    fed_time: float | None = None
    """Epoch seconds of the last line fed to the tracker."""
    busy: bool = False
    """A batch is being fed (its lines are not all in the tracker yet)."""
    ended: bool = False
    unreadable: str = ""
    pid: int | None = None
    """The container's main process on its node (for its engine's I/O)."""
    oom_kill: OomKill | None = None
    """The kernel's OOM kill of a process of this container, once found
    (watch/lane_oom.py): not looked for again."""
    exit: tuple[LogEvent, str | None] | None = None
    """The container's exit as the watch reads it (the event, its time), once read."""
    exit_read: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while the rank's exit is read (its kernel journal with it): the
    stream's end and a catch-up may learn the same exit at once."""


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


