"""Textual messages carrying the service's events to the main screen."""

from __future__ import annotations

from textual.message import Message

from sparktui.service.events import ServiceEvent


class ServiceReported(Message):
    """The service reported an event (NodeSampled, LaneChanged, ...)."""

    def __init__(self, event: ServiceEvent) -> None:
        super().__init__()
        self.event = event



class LogLinesPending(Message):
    """Log lines wait in the screen's inbox. Posted once per drain, however
    many batches arrive meanwhile, so a streaming boot log can never fill the
    message queue ahead of the operator's keys."""
