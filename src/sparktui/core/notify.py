"""Which happenings reach the operator's phone, and with what words: the
event selection, one message per event and node/lane within the dedup
window (one per incident), and a rolling hourly rate limit. Pure: the
service turns its events into `Happening`s and sends the `Message`s."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from sparktui.core.config import NotifyConfig
from sparktui.core.terminal import strip_controls

MESSAGE_MAX = 400
"""Phones cut long notifications; the evidence is one line."""
RECOVERS = ("thrash", "fatal", "stall", "unresponsive", "predicted-oom")
"""Incidents that end: each one messaged gets a recovery message when it does
(lane-ready, lane-qualified and workflow-failed are news, not conditions)."""
RECOVERY_HOLD_S = 120.0
"""An incident must stay over this long before its recovery is sent: a node
whose thrash alert clears and returns a poll later is still the same incident
(no "recovered" page followed by silence while it thrashes again)."""


@dataclass(frozen=True)
class Happening:
    event: str
    """One of core.config.NOTIFY_EVENTS."""
    subject: str
    """The node or lane."""
    evidence: str
    next_step: str


@dataclass(frozen=True)
class Message:
    title: str
    message: str
    tag: str = ""
    """The incident's key, the same on its alert and on its recovery message
    (``sparktui-thrash-dgx6``): a phone that knows such a key shows the
    recovery in the alert's place (adapters/homeassistant.notify)."""


def incident_tag(event: str, subject: str) -> str:
    return strip_controls(f"sparktui-{event}-{subject}")


@dataclass(frozen=True)
class PhoneMemory:
    """What the policy must not forget when its process dies (the service keeps
    it on disk): an operator woken for an incident is not woken again for it by
    a restarted sentinel. Times on the clock of the policy that wrote it."""

    open: tuple[tuple[str, str, float], ...] = ()
    """(event, subject, when its message went) of each incident messaged, not over."""
    ending: tuple[tuple[str, str, float, str], ...] = ()
    """(event, subject, since, why) of each open incident over, within its hold."""
    last: tuple[tuple[str, str, float], ...] = ()
    """(event, subject, when) of each message within the dedup window."""
    sent: tuple[float, ...] = ()
    """When each message of the last hour went (the hourly limit)."""


class NotifyPolicy:
    """An incident (an event on a node or lane) is *open* from its first
    message until `close`; while open nothing more is sent about it, and
    after it closes the same event on the same subject waits ``dedup_s``
    (a flapping node is one message, not one per flap). An incident that was
    messaged gets one recovery message when it ends (`recover`), under the same
    key and the same hourly limit: an operator paged at 3 a.m. learns it is over."""

    def __init__(self, config: NotifyConfig) -> None:
        self.config = config
        self._open: dict[tuple[str, str], float] = {}
        """Incidents messaged and not over yet -> when the message went."""
        self._ending: dict[tuple[str, str], tuple[float, str]] = {}
        """Incidents over, not for RECOVERY_HOLD_S yet -> (since, why)."""
        self._last: dict[tuple[str, str], float] = {}
        self._sent: deque[float] = deque()
        self._unconfirmed: dict[tuple[str, str], float] = {}
        """Incidents open in the memory taken up from disk (`restore`) that this
        policy did not hold, not `seen` since -> when taken up: not seen within
        RECOVERY_HOLD_S, they ended while nobody here watched."""
        self.held_back = 0
        """Messages the rate limit dropped since the last one sent."""

    @property
    def enabled(self) -> bool:
        return bool(self.config.service)

    def consider(self, h: Happening, now: float) -> Message | None:
        """The message to send now, or None (off, not selected, a duplicate of
        this incident, or over the rate limit)."""
        if not self.enabled or h.event not in self.config.events:
            return None
        key = (h.event, h.subject)
        if self._ending.pop(key, None) is not None:
            return None  # back within the hold: the same incident goes on
        last = self._last.get(key)
        if key in self._open or (last is not None and now - last < self.config.dedup_s):
            return None
        if not self._within_limit(now):
            return None
        self._last[key] = now
        self._open[key] = now
        evidence = " ".join(strip_controls(h.evidence).split())
        text = f"{h.subject}: {evidence}"
        if len(text) > MESSAGE_MAX - 120:
            text = text[:MESSAGE_MAX - 121] + "…"
        text += f" Next: {h.next_step}" if h.next_step else ""
        return Message(strip_controls(f"sparktui {h.event.upper()} {h.subject}"),
                       self._held_note(strip_controls(text)), incident_tag(*key))

    def _within_limit(self, now: float) -> bool:
        """Room under the hourly limit (taken when there is; counted when not)."""
        while self._sent and now - self._sent[0] >= 3600.0:
            self._sent.popleft()
        if len(self._sent) >= self.config.max_per_hour:
            self.held_back += 1
            return False
        self._sent.append(now)
        return True

    def _held_note(self, text: str) -> str:
        if self.held_back:
            text += f" (+{self.held_back} held back by the rate limit)"
            self.held_back = 0
        return text[:MESSAGE_MAX]

    def close(self, event: str, subject: str) -> None:
        """The incident is over, with nothing to tell (news, not a condition)."""
        self._open.pop((event, subject), None)
        self._unconfirmed.pop((event, subject), None)

    def recover(self, event: str, subject: str, now: float, why: str) -> None:
        """The incident is over (alert cleared, lane gone or moved on): its
        recovery message comes from `due` once it stayed over RECOVERY_HOLD_S."""
        key = (event, subject)
        self._unconfirmed.pop(key, None)  # seen to end: a recovery is told
        if key in self._open and key not in self._ending:
            self._ending[key] = (now, why)

    def due(self, now: float) -> list[Message]:
        """Recovery messages of the incidents over for RECOVERY_HOLD_S, once each,
        under the hourly limit (one held back is counted, as an alert would be);
        restored incidents not seen for as long are closed, with no message."""
        for key, restored in list(self._unconfirmed.items()):
            if now - restored >= RECOVERY_HOLD_S:
                del self._unconfirmed[key]
                self._open.pop(key, None)
        out = []
        for key, (since, why) in list(self._ending.items()):
            if now - since < RECOVERY_HOLD_S:
                continue
            del self._ending[key]
            opened = self._open.pop(key)
            event, subject = key
            if event not in RECOVERS or not self._within_limit(now):
                continue
            text = (f"{subject}: {event} is over ({why}); it lasted "
                    f"{format_span(since - opened)} from the alert.")
            out.append(Message(strip_controls(f"sparktui RECOVERED {event.upper()} {subject}"),
                               self._held_note(strip_controls(text)), incident_tag(*key)))
        return out

    def is_open(self, event: str, subject: str) -> bool:
        return (event, subject) in self._open

    def seen(self, event: str, subject: str) -> None:
        """The incident's condition is there now (its alert raised, at any level;
        the lane still stalled, serving, qualified): an open incident goes on,
        whether it was ending within its hold or restored by a restart."""
        key = (event, subject)
        self._unconfirmed.pop(key, None)
        if key in self._open:
            self._ending.pop(key, None)

    def memory(self, now: float) -> PhoneMemory:
        """What a restarted policy, or another desk's, needs (`restore`), from
        what this one holds now."""
        return PhoneMemory(
            open=tuple((e, s, t) for (e, s), t in sorted(self._open.items())),
            ending=tuple((e, s, since, why)
                         for (e, s), (since, why) in sorted(self._ending.items())),
            last=tuple((e, s, t) for (e, s), t in sorted(self._last.items())
                       if now - t < self.config.dedup_s),
            sent=tuple(t for t in self._sent if now - t < 3600.0))

    def restore(self, memory: PhoneMemory, now: float) -> None:
        """Take up the memory on disk as the truth: a dead policy's (the sentinel
        restarted), or another live one's on the same state dir (a console
        watching alone beside a sentinel just started), read before each
        decision. Its open incidents are open here, so the alert raised again
        for one is no second message, until they end as incidents end here, or
        one this policy had not held is not `seen` for RECOVERY_HOLD_S (it
        ended while nobody here watched: closed without a recovery message,
        since nothing here saw it end). One it no longer holds is over (its
        recovery went from there). Its dedup window and hourly count go on."""
        held = set(self._open)
        self._open = {(e, s): t for e, s, t in memory.open}
        self._ending = {(e, s): (since, why) for e, s, since, why in memory.ending
                        if (e, s) in self._open}
        self._last = {(e, s): t for e, s, t in memory.last}
        self._sent = deque(sorted(memory.sent))
        self._unconfirmed = {key: self._unconfirmed.get(key, now) for key in self._open
                             if key not in self._ending
                             and (key not in held or key in self._unconfirmed)}

    def due_by(self, now: float) -> bool:
        """`due` has something to do now (a hold is over)."""
        return any(now - since >= RECOVERY_HOLD_S for since, _ in self._ending.values()) \
            or any(now - restored >= RECOVERY_HOLD_S for restored in self._unconfirmed.values())


def format_span(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2 h 05 min``."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def service_problem(wanted: str, existing: list[str]) -> str | None:
    """Why ``[notify] service`` cannot reach a phone, naming what exists; None when it can."""
    if wanted in existing:
        return None
    have = ", ".join(existing) if existing else "no notify service at all"
    return (f"{wanted} does not exist in Home Assistant (it has: {have}): no phone alert "
            "would arrive -> set [notify] service to one of them")
