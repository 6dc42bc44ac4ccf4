"""The docker daemon of one node: images, containers, their logs and state
(what `docker ps/inspect/logs` report). The CLI lives in docker_cli.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

ZERO_TIME = "0001-01-01T00:00:00Z"
COPIER_BUF = 16 * 1024
"""docker's log copier's buffer (moby ``daemon/logger/copier.go``
``defaultBufSize``, the json-file and local drivers')."""


@dataclass
class Image:
    repo: str
    tag: str
    id: str
    """sha256 hex, 64 chars."""
    size_bytes: int
    created_t: float
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return f"{self.repo}:{self.tag}"


@dataclass(frozen=True)
class LogLine:
    t: float
    stream: str
    """``stdout`` or ``stderr``."""
    text: str
    """One message without its trailing newline (may hold `\\r` progress updates)."""
    partial: bool = False
    """A piece of a line docker logged before its newline came (stored, and
    printed by ``docker logs``, without a newline)."""


class EngineHandle(Protocol):
    def stop(self, *, kill: bool) -> None: ...


@dataclass
class Container:
    id: str
    name: str
    image: Image
    image_arg: str
    """The image as given to docker run (what `docker ps` shows in Image)."""
    args: list[str]
    labels: dict[str, str]
    env: list[str]
    binds: list[str]
    created_t: float
    options: dict[str, str] = field(default_factory=dict)
    status: str = "created"
    """created | running | exited | dead"""
    started_t: float | None = None
    finished_t: float | None = None
    exit_code: int = 0
    oom_killed: bool = False
    pid: int = 0
    logs: list[LogLine] = field(default_factory=list)
    engine: EngineHandle | None = None
    _held: dict[str, tuple[bytearray, float | None]] = field(default_factory=dict, repr=False)
    """Per stream, what the copier holds of a line without its newline, and
    the stamp of its first piece once one was logged."""

    def log(self, t: float, text: str, stream: str = "stdout") -> None:
        """Whole lines (``text`` split at its newlines)."""
        self.write(t, text + "\n", stream)

    def write(self, t: float, text: str, stream: str = "stdout") -> None:
        """The process wrote ``text`` at ``t``: logged as docker's copier logs
        it (moby ``daemon/logger/copier.go`` ``copySrc``, one copier a
        stream): a message per ``\\n``; a line without one, once
        COPIER_BUF bytes of it are held, as a partial message of exactly
        those bytes; every piece of a line, the last included, stamped with
        the first piece's time (``partialTS``)."""
        held, first = self._held.get(stream) or (bytearray(), None)
        held += text.encode("utf-8", "surrogateescape")
        at = 0
        while True:
            nl = held.find(b"\n", at, at + COPIER_BUF)
            if nl >= 0:
                self._message(first if first is not None else t, stream, held[at:nl])
                at, first = nl + 1, None
            elif len(held) - at >= COPIER_BUF:
                first = first if first is not None else t
                self._message(first, stream, held[at:at + COPIER_BUF], partial=True)
                at += COPIER_BUF
            else:
                break
        self._held[stream] = (held[at:], first)

    def _message(self, t: float, stream: str, data: bytes | bytearray,
                 partial: bool = False) -> None:
        self.logs.append(LogLine(t, stream, data.decode("utf-8", "surrogateescape"), partial))

    def _flush(self, t: float) -> None:
        """The process ended: what the copiers hold is logged as partial
        messages (copier.go's EOF branch: no newline follows)."""
        for stream, (held, first) in sorted(self._held.items()):
            if held:
                self._message(first if first is not None else t, stream, held, partial=True)
        self._held.clear()

    def finish(self, t: float, code: int, *, oom: bool = False) -> None:
        if self.status != "running":
            return
        self._flush(t)
        self.status, self.finished_t, self.exit_code, self.oom_killed = "exited", t, code, oom
        self.pid = 0


class DockerDaemon:
    def __init__(self) -> None:
        self.images: dict[str, Image] = {}
        """By `repo:tag`."""
        self.containers: dict[str, Container] = {}
        """By name."""

    def find_image(self, ref: str) -> Image | None:
        if ref in self.images:
            return self.images[ref]
        if ":" not in ref.rsplit("/", 1)[-1] and f"{ref}:latest" in self.images:
            return self.images[f"{ref}:latest"]
        for img in self.images.values():
            if img.id.startswith(ref.removeprefix("sha256:")) and len(ref) >= 12:
                return img
        return None

    def find(self, name_or_id: str) -> Container | None:
        c = self.containers.get(name_or_id.lstrip("/"))
        if c is not None:
            return c
        if len(name_or_id) >= 4:
            for c in self.containers.values():
                if c.id.startswith(name_or_id):
                    return c
        return None

    def running(self) -> list[Container]:
        return [c for c in self.containers.values() if c.status == "running"]

    def clear(self) -> None:
        """Power loss: every container is gone (the node comes back clean)."""
        self.containers.clear()
