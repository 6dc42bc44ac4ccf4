"""Textual messages carrying the service's events to the main screen."""

from __future__ import annotations

from textual.message import Message

from sparktui.service.events import ServiceEvent


class ServiceReported(Message):
    """The service reported an event (NodeSampled, LaneChanged, ...)."""

    def __init__(self, event: ServiceEvent) -> None:
        super().__init__()
        self.event = event

