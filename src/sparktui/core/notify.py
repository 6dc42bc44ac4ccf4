"""Which happenings reach the operator's phone, and with what words: the
event selection, one message per event and node/lane within the dedup
window (one per incident), and a rolling hourly rate limit. Pure: the
service turns its events into `Happening`s and sends the `Message`s."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from sparktui.core.config import NotifyConfig

MESSAGE_MAX = 400
"""Phones cut long notifications; the evidence is one line."""


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


class NotifyPolicy:
    """An incident (an event on a node or lane) is *open* from its first
    message until `close`; while open nothing more is sent about it, and
    after it closes the same event on the same subject waits ``dedup_s``
    (a flapping node is one message, not one per flap)."""

    def __init__(self, config: NotifyConfig) -> None:
        self.config = config
        self._open: set[tuple[str, str]] = set()
        self._last: dict[tuple[str, str], float] = {}
        self._sent: deque[float] = deque()
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
        last = self._last.get(key)
        if key in self._open or (last is not None and now - last < self.config.dedup_s):
            return None
        while self._sent and now - self._sent[0] >= 3600.0:
            self._sent.popleft()
        if len(self._sent) >= self.config.max_per_hour:
            self.held_back += 1
            return None
        self._last[key] = now
        self._open.add(key)
        self._sent.append(now)
        evidence = " ".join(h.evidence.split())
        text = f"{h.subject}: {evidence}"
        if len(text) > MESSAGE_MAX - 120:
            text = text[:MESSAGE_MAX - 121] + "…"
        text += f" Next: {h.next_step}" if h.next_step else ""
        if self.held_back:
            text += f" (+{self.held_back} held back by the rate limit)"
            self.held_back = 0
        return Message(f"sparktui {h.event.upper()} {h.subject}", text[:MESSAGE_MAX])

    def close(self, event: str, subject: str) -> None:
        """The incident is over (alert cleared, lane gone or moved on)."""
        self._open.discard((event, subject))

    def is_open(self, event: str, subject: str) -> bool:
        return (event, subject) in self._open
