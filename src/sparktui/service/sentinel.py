"""The sentinel: the console's service without the UI, as a long-running,
read-only process, so the night stays watched when nobody has the console
open (Glances' alert actions never fire without a client: nicolargo/glances#2240).

It holds ``<state_dir>/sentinel.pid`` (an exclusive ``flock``) so only one
runs per state directory, writes one line per event (journald reads its
stdout under systemd, with ``<N>`` priority prefixes), and stops on SIGTERM:
the service's tasks cancelled, connections closed, the lock released.
It never previews or runs a workflow. Consoles attach to it over
``<state_dir>/sentinel.sock`` (service/attach.py) instead of polling the
nodes a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from sparktui.adapters.exposition import MetricsServer
from sparktui.core.advice import STALE_NEXT
from sparktui.core.canary import describe_age, stale_age
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config
from sparktui.core.listen import parse_listen
from sparktui.core.state import NodeState
from sparktui.core.terminal import strip_controls
from sparktui.core.thrash import ThrashLevel
from sparktui.ops import sentinel_state
from sparktui.ops.events import WorkflowEvent
from sparktui.ops.journal_tail import JournalWorkflows
from sparktui.ops.private import open_private, private_dir
from sparktui.service.attach import SentinelHub, socket_path
from sparktui.service.cluster import ClusterService
from sparktui.service.events import (
    AlertCleared,
    AlertRaised,
    LaneChanged,
    LaneGone,
    NodeSampled,
    ServiceEvent,
    WorkflowProgressed,
)
from sparktui.service.export import FleetMetrics
from sparktui.service.lanes import LaneView

log = logging.getLogger(__name__)

PID_FILE = "sentinel.pid"
JOURNAL_READ_S = 2.0
"""How often the journal is read for workflows run by other processes."""

INFO, WARNING, ERR = 6, 4, 3
"""syslog priorities (sd-daemon(3) ``<N>`` prefixes)."""


class SentinelRunning(Exception):
    """Another sentinel holds this state directory's pid lock."""


class PidLock:
    """``<state_dir>/sentinel.pid``: an exclusive flock held for the life of
    the process (the kernel drops it if the process dies), holding the pid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        private_dir(self.path.parent)
        fd = open_private(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise SentinelRunning(f"a sentinel (pid {other}) already watches from "
                                  f"{self.path.parent} (lock {self.path})") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


def running_sentinel(state_dir: Path) -> int | None:
    """The pid of the sentinel that holds ``state_dir``'s lock, or None. Asks
    the lock itself (a pid file left by a dead sentinel holds no lock)."""
    try:
        fd = os.open(state_dir / PID_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.read(fd, 32).decode(errors="replace").strip()
        return int(text) if text.isdigit() else 0
    finally:
        os.close(fd)  # also drops the shared lock when it was ours
    return None


class EventLines:
    """Service events -> one human line per change worth a line: node state,
    memory level, staleness, lane phase/health/canary, alerts (again only when
    their level changes). Samples that change nothing write nothing."""

    def __init__(self, poll_interval_s: float,
                 clusters: Mapping[str, Sequence[str]] | None = None) -> None:
        """``clusters``: each cluster's nodes (the config's), so a lane's lines
        name every node it runs on from the first, before every rank is seen."""
        self.poll_interval_s = poll_interval_s
        self.clusters = dict(clusters or {})
        self._nodes: dict[str, tuple[str, str, bool]] = {}
        self._lanes: dict[str, tuple[str, str, str, bool, tuple[str, ...]]] = {}
        self._alerts: dict[str, str] = {}

    def lines(self, event: ServiceEvent) -> list[tuple[int, str]]:
        if isinstance(event, NodeSampled):
            return self._node(event)
        if isinstance(event, LaneChanged):
            return self._lane(event)
        if isinstance(event, LaneGone):
            self._lanes.pop(event.name, None)
            return [(INFO, f"lane {event.name}: gone (no container left)")]
        if isinstance(event, AlertRaised):
            a = event.alert
            if self._alerts.get(a.key) == a.level:
                return []  # the same alert with fresher numbers
            self._alerts[a.key] = a.level
            level = ERR if a.level in ("thrash", "fatal") else WARNING
            lane = self._lanes.get(a.subject)
            on = f" ({_nodes_text(lane[4])})" if lane and lane[4] else ""
            return [(level, f"ALERT {a.level} {a.subject}{on}: {'; '.join(a.evidence)}"
                            + (f" -> {a.next_step}" if a.next_step else ""))]
        if isinstance(event, AlertCleared):
            self._alerts.pop(event.key, None)
            return [(INFO, f"cleared {event.key}" + (f" ({event.why})" if event.why else ""))]
        return []

    def _node(self, e: NodeSampled) -> list[tuple[int, str]]:
        snap, name = e.snapshot, e.snapshot.node
        state = snap.state.value
        level = e.verdict.level if e.verdict is not None else ThrashLevel.OK
        age = stale_age(snap.last_ok_at, snap.taken_at, self.poll_interval_s)
        stale = age is not None and snap.state is not NodeState.POWERED_OFF  # known: off
        before = self._nodes.get(name)
        self._nodes[name] = (state, level.label, stale)
        out: list[tuple[int, str]] = []
        if before is None or before[0] != state:
            why = f" ({snap.error})" if snap.error and snap.state is not NodeState.ONLINE else ""
            was = f"{before[0]} -> " if before is not None else ""
            out.append((INFO if snap.online else WARNING, f"node {name}: {was}{state}{why}"))
        # suspected and thrash arrive as alerts; their evidence is there
        if before is not None and before[1] != level.label and level < ThrashLevel.SUSPECTED:
            evidence = f" ({'; '.join(e.verdict.evidence)})" if e.verdict and \
                e.verdict.evidence else ""
            out.append((INFO, f"memory {name}: {before[1]} -> {level.label}{evidence}"))
        if stale and (before is None or not before[2]):
            assert age is not None
            out.append((WARNING, f"node {name}: stale, {describe_age(age)} -> {STALE_NEXT}"))
        elif not stale and before is not None and before[2]:
            out.append((INFO, f"node {name}: fresh again"))
        return out

    def _lane(self, e: LaneChanged) -> list[tuple[int, str]]:
        v = e.lane
        canary = v.canary[0] if v.canary else ""
        stale = v.stale_s is not None
        before = self._lanes.get(v.name)
        # the cluster's nodes, then any other node a rank was seen on, kept when
        # a dark node's rank drops out of the view
        nodes = tuple(dict.fromkeys((*self.clusters.get(v.cluster, ()),
                                     *(before[4] if before else ()), *v.nodes)))
        self._lanes[v.name] = (v.phase, v.health, canary, stale, nodes)
        out: list[tuple[int, str]] = []
        if before is None:
            on = f" ({_nodes_text(nodes)})" if nodes else ""
            unseen = [n for n in nodes if n not in v.nodes]
            seen = ("no rank seen yet" if not v.nodes else
                    f"no rank seen yet on {', '.join(unseen)}" if unseen else "")
            out.append((INFO, f"lane {v.name} on {v.cluster}{on}: {v.phase}"
                              + (f" ({seen})" if seen else "")))
            return out + self._stale_lines(v, None)
        if nodes != before[4]:
            out.append((INFO, f"lane {v.name} on {v.cluster}: ranks on {', '.join(nodes)}"))
        if before[0] != v.phase:
            bad = v.phase in ("failed", "unresponsive", "stalled")
            on = f" ({_nodes_text(nodes)})" if bad and nodes else ""
            fail = f": {v.failure}" if v.failure and v.phase == "failed" else ""
            out.append((WARNING if bad else INFO, f"lane {v.name}: {before[0]} -> {v.phase}"
                                                  f"{on}, health {v.health}{fail}"))
        elif before[1] != v.health:
            level = INFO if v.health == "ok" else WARNING
            out.append((level, f"lane {v.name}: health {before[1]} -> {v.health}"))
        if canary and canary != before[2]:
            out.append((INFO, f"lane {v.name} canary: {'; '.join(v.canary)}"))
        return out + self._stale_lines(v, before[3])

    @staticmethod
    def _stale_lines(v: LaneView, was_stale: bool | None) -> list[tuple[int, str]]:
        if v.stale_s is not None and not was_stale:
            return [(WARNING, f"lane {v.name}: endpoint stale, {describe_age(v.stale_s)}")]
        if v.stale_s is None and was_stale:
            return [(INFO, f"lane {v.name}: endpoint fresh again")]
        return []


def _nodes_text(nodes: Sequence[str]) -> str:
    return ("node " if len(nodes) == 1 else "nodes ") + ", ".join(nodes)


def line_writer(journal: bool, clock: Clock,
                write: Callable[[str], None]) -> Callable[[int, str], None]:
    """Under systemd (``JOURNAL_STREAM`` set) a ``<N>`` prefix gives journald
    the priority and its own timestamp; on a terminal, a UTC time instead.
    Either way without terminal control sequences: evidence quotes engine logs."""

    def emit(priority: int, text: str) -> None:
        text = strip_controls(text)
        if journal:
            write(f"<{priority}>{text}")
        else:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock.time()))
            write(f"{stamp} {text}")

    return emit


class LogLines(logging.Handler):
    """The process's warnings and errors as sentinel lines, through the same
    writer (priority, no control sequence). Without it Python's last-resort
    handler wrote them raw to stderr, into the journal too: a phone alert's
    failure quoting Home Assistant's (or a proxy's) error body, line breaks
    and escape bytes included, a traceback as many lines of no priority."""

    def __init__(self, emit: Callable[[int, str], None]) -> None:
        super().__init__(logging.WARNING)
        self._write = emit

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            priority = ERR if record.levelno >= logging.ERROR else WARNING
            who = "sentinel" if record.name.startswith("sparktui") else record.name
            self._write(priority, f"{who}: {text}")
            if record.exc_info:
                trace = record.exc_text or logging.Formatter().formatException(record.exc_info)
                for line in trace.splitlines():
                    self._write(priority, f"{who}:   {line}")
        except Exception:  # logging must never stop the watch
            self.handleError(record)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """On the root logger until the block ends."""
        root = logging.getLogger()
        root.addHandler(self)
        try:
            yield
        finally:
            root.removeHandler(self)


class Sentinel:
    """Runs a `ClusterService` until ``stop`` is set; never acts on the cluster."""

    def __init__(self, config: Config, service: ClusterService, *,
                 emit: Callable[[int, str], None], clock: Clock | None = None) -> None:
        self.config = config
        self.service = service
        self.clock = clock or SystemClock()
        self._emit = emit
        self._lines = EventLines(config.console.poll_interval_s,
                                 {name: c.nodes for name, c in config.clusters.items()})
        self.lock = PidLock(config.state_dir() / PID_FILE)
        self.hub = SentinelHub(socket_path(config.state_dir()), clock=self.clock,
                               pid=os.getpid())
        self._journal_task: asyncio.Task[None] | None = None
        self._good_nodes: dict[str, float] = {}
        self._written_at = 0.0
        self.metrics: FleetMetrics | None = None
        self._exposition: MetricsServer | None = None
        if config.export.listen:  # validated at load: loopback unless allowed
            self.metrics = FleetMetrics(config, self.clock, service.recipes)
            self._exposition = MetricsServer(parse_listen(config.export.listen),
                                             self.metrics.registry())

    def on_event(self, event: ServiceEvent) -> None:
        self.hub.publish(event)
        if self.metrics is not None:
            self.metrics.observe(event)
        for priority, text in self._lines.lines(event):
            self._emit(priority, text)
        if isinstance(event, NodeSampled):
            self._remember(event)

    def _remember(self, event: NodeSampled) -> None:
        """Keep ``sentinel/last_good.json`` current, once a poll interval at most."""
        snap = event.snapshot
        if snap.last_ok_at is not None:
            self._good_nodes[snap.node] = snap.last_ok_at
        now = self.clock.time()
        if now - self._written_at < self.config.console.poll_interval_s:
            return
        self._written_at = now
        lanes = {name: now - (v.stale_s or 0.0) for name, v in self.service.lanes().items()
                 if v.health == "ok" or v.stale_s is not None}
        try:
            sentinel_state.write(self.config.state_dir(), sentinel_state.LastGood(
                os.getpid(), now, dict(self._good_nodes), lanes))
        except OSError as exc:  # a full disk must not stop the watch
            self._emit(WARNING, f"sentinel: cannot write {sentinel_state.FILE}: {exc}")

    async def _workflows(self) -> None:
        """Every workflow any process runs from now on (a console's, a shell's
        `sparktui stop`), as the journal tells it, into the night desk: the
        recording holds it and a failure reaches the phone. Not sent to the
        consoles: the one that runs it shows it already."""
        tail = self.service.journal
        assert tail is not None
        tail.subscribe(JournalWorkflows(self._workflow), from_now=True)
        while True:
            await self.clock.sleep(JOURNAL_READ_S)
            tail.read()

    def _workflow(self, event: WorkflowEvent) -> None:
        try:
            self.service.night.on_event(WorkflowProgressed(event))
        except Exception:  # the night desk must not stop the watch
            log.exception("night desk failed on a journaled %r", event)

    async def run(self, stop: asyncio.Event) -> None:
        """Take the lock (raises `SentinelRunning`), watch until ``stop``,
        then stop every task and release the lock, whatever happened."""
        self.lock.acquire()
        with LogLines(self._emit).installed():
            await self._run(stop)

    async def _run(self, stop: asyncio.Event) -> None:
        try:
            self._emit(INFO, f"sentinel: watching {len(self.config.nodes)} nodes "
                             f"(pid {os.getpid()}, state {self.config.state_dir()})")
            await self.service.start(self.on_event)
            self._journal_task = asyncio.create_task(self._workflows(),
                                                     name="sentinel:workflows")
            if (problem := await self.service.night.phone_problem()) is not None:
                self._emit(WARNING, f"sentinel: {problem}")
            await self.hub.start()
            self._emit(INFO, f"sentinel: consoles attach at {self.hub.path}")
            if self._exposition is not None:
                await self._exposition.start()
                self._emit(INFO, f"sentinel: Prometheus metrics at "
                                 f"http://{self._exposition.address}/metrics")
            await stop.wait()
            self._emit(INFO, "sentinel: stopping")
        finally:
            if self._journal_task is not None:
                self._journal_task.cancel()
                await asyncio.gather(self._journal_task, return_exceptions=True)
            if self._exposition is not None:
                await self._exposition.close()
            await self.hub.close()
            await self.service.stop()
            sentinel_state.remove(self.config.state_dir())
            self.lock.release()
        self._emit(INFO, "sentinel: stopped")
