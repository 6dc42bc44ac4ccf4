"""The console's memory of the night and its reach beyond the screen.

`ClusterService` hands every event it reports to `NightDesk.on_event`; the
desk keeps what a bundle needs when a node goes dark (`HeldMemory`: recent
snapshots, followed log lines, alerts, guard verdicts), writes an incident
bundle by itself when a lane fails or stalls or a node thrashes, and feeds
the recorder and the phone notifier when they are configured.

Nothing here decides what an incident says (core/incident.py) or how a bundle
is collected (ops/bundle.py); the desk only composes them and owns the tasks
it starts (`stop()` cancels them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from sparktui.core.clock import Clock
from sparktui.core.config import Config
from sparktui.core.incident import Held, HeldAlert, SnapshotRow, scrub, snapshot_row
from sparktui.core.notify import (
    Happening,
    Message,
    NotifyPolicy,
    PhoneMemory,
    service_problem,
)
from sparktui.core.qualify import GateState
from sparktui.ops.bundle import COLLECT_TIMEOUT_S, BundleResult, BundleSources, write_bundle
from sparktui.ops.events import GuardsEvaluated, WorkflowFinished, WorkflowStarted
from sparktui.ops.journal import clock_of
from sparktui.ops.workflows.qualify import PREDICTED_OOM_STEP
from sparktui.service import phoned
from sparktui.service.events import (
    LANE_GONE,
    Alert,
    AlertCleared,
    AlertRaised,
    LaneChanged,
    LaneGone,
    LogLinesArrived,
    NodeSampled,
    ServiceEvent,
    Sink,
    WorkflowProgressed,
)
from sparktui.service.recorded import read_recording
from sparktui.service.recording import Recorder, night_path

log = logging.getLogger(__name__)

HELD_SNAPSHOTS = 1800
"""Polls kept per node: an hour at the default 2 s interval."""
HELD_LINES = 1000
HELD_ALERTS = 500
AUTO_BUNDLES_MAX = 24
"""Automatic bundles per console run: a flapping node must not fill the disk."""
SETTLE_POLLS = 2
"""An automatic bundle waits this many polls so the incident's neighbours
(the second node going dark, the fatal line of another rank) are in it."""
PHONED_ALERTS = {"fatal": "fatal", "thrash": "thrash", "canary": "unresponsive"}
"""An alert key's kind (``canary:<lane>``) -> the phone event of its incident:
a lane the canary calls unresponsive (service/alerts.canary) is paged as a
FATAL is, and told over when its alert clears."""


class Phone(Protocol):
    """What phone alerts need of Home Assistant (adapters/homeassistant.py)."""

    async def notify(self, service: str, title: str, message: str, *,
                     tag: str = "") -> None: ...

    async def services(self, domain: str) -> list[str]: ...


def _drop(event: ServiceEvent) -> None:
    """Before `attach`: nothing to report to."""


class HeldMemory:
    """The service's event stream folded into what a bundle can use, bounded."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.snapshots: dict[str, deque[SnapshotRow]] = {}
        self.logs: dict[str, dict[int, deque[str]]] = {}
        self.lane_nodes: dict[str, dict[int, str]] = {}
        self.lane_cluster: dict[str, str] = {}
        self.alerts: deque[HeldAlert] = deque(maxlen=HELD_ALERTS)
        self.guards: deque[dict[str, object]] = deque(maxlen=HELD_ALERTS)

    def fold(self, ev: ServiceEvent, t: float | None = None) -> None:
        """One event, seen now (or at ``t``: a recording read back)."""
        if isinstance(ev, NodeSampled):
            level = ev.verdict.level.label if ev.verdict else ""
            self.snapshots.setdefault(ev.snapshot.node, deque(maxlen=HELD_SNAPSHOTS)).append(
                snapshot_row(ev.snapshot, level))
        elif isinstance(ev, LogLinesArrived):
            ranks = self.logs.setdefault(ev.lane, {})
            ranks.setdefault(ev.rank, deque(maxlen=HELD_LINES)).extend(
                line.raw for line in ev.lines)
        elif isinstance(ev, LaneChanged):
            # A rank whose node stopped answering drops out of the lane's view
            # (its containers are not read): its node is still the lane's, the
            # very node an incident bundle must name. A lane served again on
            # another cluster starts afresh.
            name, cluster = ev.lane.name, ev.lane.cluster
            known = self.lane_nodes.get(name)
            if known is None or (cluster and cluster != self.lane_cluster.get(name, cluster)):
                known = self.lane_nodes[name] = {}
            known.update({r.rank: r.node for r in ev.lane.ranks})
            if cluster:
                self.lane_cluster[name] = cluster
        elif isinstance(ev, AlertRaised):
            a = ev.alert
            self.alerts.append(HeldAlert(self._clock.time() if t is None else t, a.key,
                                         a.level, a.subject, a.evidence, a.next_step))
        elif isinstance(ev, WorkflowProgressed) and isinstance(ev.event, GuardsEvaluated):
            g = ev.event
            self.guards.append({"wf": g.wf, "t": g.at, "passed": list(g.passed),
                                "refused": list(g.refused), "overridden": list(g.overridden),
                                "warnings": list(g.warnings)})

    def held(self, kernel: dict[str, deque[str]] | None = None) -> Held:
        """A copy, safe to read while events keep arriving."""
        return Held(
            logs={lane: {r: list(d) for r, d in ranks.items()}
                  for lane, ranks in self.logs.items()},
            lane_nodes={k: dict(v) for k, v in self.lane_nodes.items()},
            lane_cluster=dict(self.lane_cluster),
            kernel={n: list(d) for n, d in (kernel or {}).items()},
            snapshots={n: list(d) for n, d in self.snapshots.items()},
            alerts=list(self.alerts), guards=list(self.guards))


@dataclass
class _Pending:
    subject: str
    reasons: list[str]


class NightDesk:
    def __init__(self, config: Config, *, clock: Clock, state_dir: Path) -> None:
        self.config = config
        self.clock = clock
        self.state_dir = state_dir
        self.memory = HeldMemory(clock)
        self.collect_timeout_s = COLLECT_TIMEOUT_S
        self.auto_bundle = True
        self.bundles: list[BundleResult] = []
        """Bundles written by this console run, oldest first."""
        self._sources: Callable[[], BundleSources] | None = None
        self._kernel: Callable[[], dict[str, deque[str]]] = dict
        self._pending: dict[str, _Pending] = {}
        self._done_keys: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.policy = NotifyPolicy(config.notify)
        self.sent: list[tuple[str, str]] = []
        """(title, message) of every phone alert sent."""
        self._phone: Phone | None = None
        self._emit: Sink = _drop
        self._alerts: dict[str, Alert] = {}
        self._notified: set[str] = set()
        self._remembered: PhoneMemory | None = None
        """The policy's memory as last written to `phoned` (or tried)."""
        self._forgetting = False
        """The last write of it failed."""
        self._unshared = False
        """The last try of its lock failed."""
        self.recorder: Recorder | None = None
        self._serves_unalerted: set[str] = set()
        """Lanes whose serve began and raised no fatal alert since (`_serve_witnessed`)."""

    def attach(self, sources: Callable[[], BundleSources],
               kernel: Callable[[], dict[str, deque[str]]], *, emit: Sink,
               phone: Phone | None) -> None:
        """Called by the service once connected: where bundles are collected
        from, how to report an alert as notified, and Home Assistant."""
        self._sources = sources
        self._kernel = kernel
        self._emit = emit
        self._phone = phone
        if self.config.record.enabled and self.recorder is None:
            self.recorder = Recorder(night_path(self.state_dir, self.clock.time()),
                                     max_bytes=int(self.config.record.max_mb * 1e6),
                                     clock=self.clock)
            try:
                self.recorder.open()
            except OSError as exc:  # a full or read-only disk must not stop the console
                log.warning("the night is not recorded: %s", exc)
                self.recorder = None
        if self.policy.enabled and phone is None:
            log.warning("[notify] service is set but Home Assistant is not available: "
                        "no phone alerts")
        elif self.policy.enabled:  # what the last process that phoned had told
            now = self.clock.time()
            self.policy.restore(phoned.read(self.state_dir, clock_of(self.clock), now), now)
            self._remembered = self.policy.memory(now)

    def detach(self) -> None:
        """The service attached to a sentinel again: the sentinel's desk records
        and phones from now on, so this one stops both (a bundle it is
        collecting still finishes; `attach` starts them again)."""
        self._emit = _drop
        self._phone = None
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None

    async def phone_problem(self) -> str | None:
        """Why phone alerts would not arrive (the service is missing from Home
        Assistant, or it did not say), or None: asked once, at the start."""
        if not self.policy.enabled or self._phone is None:
            return None
        try:
            existing = await self._phone.services("notify")
        except Exception as exc:  # the client never retries a refused token
            return f"could not check [notify] service {self.policy.config.service}: {exc}"
        return service_problem(self.policy.config.service, existing)

    def on_event(self, ev: ServiceEvent) -> ServiceEvent:
        """Every event the service reports, synchronously; must not block.
        Returns the event to report (an alert already sent marked notified)."""
        if self.recorder is not None:
            self.recorder.write(ev)
        if isinstance(ev, AlertRaised) and ev.alert.notified:
            return ev  # our own mark coming back through the service
        self.memory.fold(ev)
        self._notify(ev)
        if isinstance(ev, AlertRaised):
            self._alerts[ev.alert.key] = ev.alert
            if ev.alert.key in self._notified and not ev.alert.notified:
                ev = AlertRaised(replace(ev.alert, notified=True))
        if isinstance(ev, AlertRaised):
            a = ev.alert
            if a.level in ("fatal", "thrash"):
                self._trigger(a.key, self._subject_of(a.subject),
                              f"{a.level} {a.subject}: {a.evidence[0] if a.evidence else ''}")
        elif isinstance(ev, AlertCleared):
            self._done_keys.discard(ev.key)
            self._notified.discard(ev.key)
        elif isinstance(ev, LaneChanged) and ev.lane.phase == "stalled":
            self._trigger(f"stall:{ev.lane.name}", ev.lane.name,
                          f"stall {ev.lane.name}: no progress for "
                          f"{self.config.console.stall_after_s:g} s")
        elif isinstance(ev, LaneGone):
            self._done_keys = {k for k in self._done_keys if not k.endswith(f":{ev.name}")}
        elif isinstance(ev, WorkflowProgressed):
            self._serve_witnessed(ev.event)
        return ev

    def _serve_witnessed(self, e: object) -> None:
        """A serve that ended on a fatal line with no fatal alert since it began
        (in event order, no clock): its ranks died and were removed between two
        container reads (issue 25: a boot that fails within a second), and its
        journaled end, with the line and every rank's last lines, is the only
        witness. It is bundled as that alert would have been."""
        if isinstance(e, WorkflowStarted) and e.kind == "serve":
            self._serves_unalerted.add(e.target)
        elif isinstance(e, WorkflowFinished) and e.kind == "serve" \
                and e.target in self._serves_unalerted:
            self._serves_unalerted.discard(e.target)
            if not e.ok and isinstance(e.detail.get("failure"), dict):
                self._trigger(f"fatal:{e.target}", e.target, f"fatal {e.target}: {e.message}")

    # -- phone alerts -----------------------------------------------------------

    def _happening(self, ev: ServiceEvent) -> tuple[Happening, str | None] | None:
        """What an event means for the phone, and the alert key it belongs to."""
        if isinstance(ev, AlertRaised):
            a = ev.alert
            evidence = a.evidence[0] if a.evidence else a.level
            if a.level == PREDICTED_OOM_STEP:  # a node's rank: one message per lane
                lane = self._subject_of(a.subject)
                return Happening("predicted-oom", lane, evidence, a.next_step), a.key
            kind = PHONED_ALERTS.get(a.key.partition(":")[0])
            if kind is None or a.level != kind:
                return None  # a suspected thrash is no page
            return Happening(kind, a.subject, evidence, a.next_step), a.key
        if isinstance(ev, LaneChanged):
            view = ev.lane
            if view.phase == "stalled":
                return Happening("stall", view.name, f"no boot progress for "
                                 f"{self.config.console.stall_after_s:g} s",
                                 f"read the boot log of {view.name}; stop it (x) if it is "
                                 f"really stuck, then re-serve"), None
            ready = Happening("lane-ready", view.name, f"serving on {view.cluster}",
                              f"qualify it before trusting it: `sparktui qualify {view.name}`")
            if view.phase == "serving" and view.gate == GateState.QUALIFIED \
                    and not self.policy.is_open("lane-qualified", view.name):
                return Happening("lane-qualified", view.name,
                                 f"qualified on {view.cluster}: {view.gate_text}",
                                 f"it can take traffic (port {view.port})"), None
            if view.phase == "serving" and view.gate in ("", GateState.QUALIFYING) \
                    and not self.policy.is_open(ready.event, view.name):
                return ready, None
        if isinstance(ev, WorkflowProgressed) and isinstance(ev.event, WorkflowFinished) \
                and not ev.event.ok:
            e = ev.event
            return Happening("workflow-failed", e.target, f"{e.kind} failed: {e.message}",
                             "read `sparktui shiftlog`; a plug left off is offered at the "
                             "next start"), None
        return None

    def _seen(self, ev: ServiceEvent) -> list[tuple[str, str]]:
        """The incidents (event, subject) whose condition this event shows is there."""
        if isinstance(ev, AlertRaised):
            a = ev.alert
            if a.level == PREDICTED_OOM_STEP:
                return [("predicted-oom", self._subject_of(a.subject))]
            kind = PHONED_ALERTS.get(a.key.partition(":")[0])
            return [(kind, a.subject)] if kind is not None else []
        if isinstance(ev, LaneChanged):
            view = ev.lane
            return [(event, view.name) for event, there in (
                ("stall", view.phase == "stalled"), ("lane-ready", view.phase == "serving"),
                ("lane-qualified", view.gate == GateState.QUALIFIED)) if there]
        return []

    def _notify(self, ev: ServiceEvent) -> None:
        if self._phone is None or not self.policy.enabled:
            return
        now = self.clock.time()
        found = self._happening(ev)
        seen = self._seen(ev)
        if found is None and not seen and not self.policy.due_by(now) \
                and not isinstance(ev, AlertCleared | LaneChanged | LaneGone):
            return  # nothing here for the phone: the memory is not read or written
        with self._shared_memory(now):
            for event, subject in seen:
                self.policy.seen(event, subject)
            self._close_incidents(ev)
            out: list[tuple[Message, str | None]] = [(m, None) for m in self.policy.due(now)]
            if found is not None:
                happening, key = found
                message = self.policy.consider(happening, now)
                if happening.event == "workflow-failed":
                    self.policy.close(happening.event, happening.subject)  # each its own
                if message is not None:
                    out.append((message, key))
            self._remember(now)  # before a message goes: a restart must know it went
        for message, key in out:
            self._send_soon(message, key)

    @contextlib.contextmanager
    def _shared_memory(self, now: float) -> Iterator[None]:
        """The decision made on the memory on disk, under its lock (`phoned`): what
        another desk on this state dir phoned or told over is what this one
        knows. A lock that cannot be had (a read-only state dir) leaves the
        decision to this desk's own memory (said once); so does a write of ours
        that failed (the file is behind what this desk holds)."""
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(phoned.locked(self.state_dir))
            except OSError as exc:
                if not self._unshared:
                    log.warning("the phone's memory is not shared (%s): another desk on "
                                "this state dir may phone the same incident", exc)
                self._unshared = True
            else:
                self._unshared = False
                if not self._forgetting:
                    self.policy.restore(
                        phoned.read(self.state_dir, clock_of(self.clock), now), now)
                    self._remembered = self.policy.memory(now)
            yield

    def _remember(self, now: float) -> None:
        """The policy's memory onto disk when it changed. A disk that refuses it
        costs a second message after a restart, never this one (said once, tried
        again at the next change)."""
        memory = self.policy.memory(now)
        if memory == self._remembered:
            return
        self._remembered = memory
        try:
            phoned.write(self.state_dir, memory, clock_of(self.clock))
        except OSError as exc:
            if not self._forgetting:
                log.warning("the phone's memory is not kept (%s): a restart may phone "
                            "an open incident again", exc)
            self._forgetting = True
            return
        self._forgetting = False

    def _send_soon(self, message: Message, key: str | None) -> None:
        secrets = self._sources().secrets if self._sources is not None else ()
        title, text = scrub(message.title, secrets), scrub(message.message, secrets)
        task = asyncio.create_task(self._send(title, text, key, message.tag), name="notify")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _close_incidents(self, ev: ServiceEvent) -> None:
        """Which open incidents this event ends (their recoveries come later)."""
        now = self.clock.time()
        ended: list[tuple[str, str, str]] = []
        if isinstance(ev, AlertCleared):
            kind, _, subject = ev.key.partition(":")
            ended.append((PHONED_ALERTS.get(kind, kind), subject, ev.why or "alert cleared"))
        elif isinstance(ev, LaneChanged):
            if ev.lane.phase != "stalled":
                ended.append(("stall", ev.lane.name, f"the boot moved on: {ev.lane.phase}"))
            if ev.lane.phase != "serving":
                self.policy.close("lane-ready", ev.lane.name)
            if ev.lane.gate != GateState.QUALIFIED:
                self.policy.close("lane-qualified", ev.lane.name)
        elif isinstance(ev, LaneGone):
            for kind in ("lane-ready", "lane-qualified"):
                self.policy.close(kind, ev.name)
            # its fatal alert was cleared just before, why: lane gone (the service)
            ended += [(kind, ev.name, LANE_GONE) for kind in ("stall", "predicted-oom")]
        for kind, subject, why in ended:
            self.policy.recover(kind, subject, now, why)

    async def _send(self, title: str, text: str, key: str | None, tag: str) -> None:
        assert self._phone is not None
        try:
            await self._phone.notify(self.policy.config.service, title, text, tag=tag)
        except Exception as exc:  # one lost message; the client never retries a refusal
            log.warning("phone alert not sent (%s): %s", title, exc)
            return
        self.sent.append((title, text))
        if key is not None and key in self._alerts:
            self._notified.add(key)
            self._emit(AlertRaised(replace(self._alerts[key], notified=True)))

    def _subject_of(self, subject: str) -> str:
        """A thrashing node's bundle is its lane's (every rank, both dark nodes)."""
        for lane, ranks in self.memory.lane_nodes.items():
            if subject in ranks.values():
                return lane
        return subject

    def _trigger(self, key: str, subject: str, reason: str) -> None:
        if key.startswith("fatal:"):
            self._serves_unalerted.discard(subject)
        if not self.auto_bundle or self._sources is None or key in self._done_keys:
            return
        self._done_keys.add(key)
        pending = self._pending.get(subject)
        if pending is not None:  # not collected yet: this alert joins it
            pending.reasons.append(reason)
            return
        if len(self.bundles) + len(self._pending) >= AUTO_BUNDLES_MAX:
            log.warning("automatic bundle of %s skipped: %d written already", subject,
                        AUTO_BUNDLES_MAX)
            return
        self._pending[subject] = _Pending(subject, [reason])
        task = asyncio.create_task(self._bundle_later(subject), name=f"bundle:{subject}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _bundle_later(self, subject: str) -> None:
        await self.clock.sleep(SETTLE_POLLS * self.config.console.poll_interval_s)
        pending = self._pending.pop(subject)
        assert self._sources is not None
        src = self._sources()
        src.timeout_s = self.collect_timeout_s
        try:
            result = await write_bundle(src, subject,
                                        held=self.memory.held(self._kernel()),
                                        reason="; ".join(pending.reasons))
        except Exception:  # a bundle must never take the console down
            log.exception("automatic bundle of %s failed", subject)
            return
        self.bundles.append(result)
        log.info("incident bundle written: %s", result.path)

    async def stop(self) -> None:
        tasks, self._tasks = set(self._tasks), set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None


def held_from_recordings(paths: list[Path], clock: Clock) -> Held:
    """What the console recorded (``sparktui bundle`` run beside it, or after)."""
    memory = HeldMemory(clock)
    for path in paths:
        for t, ev in read_recording(path):
            if not (isinstance(ev, AlertRaised) and ev.alert.notified):
                memory.fold(ev, t)
    return memory.held()
