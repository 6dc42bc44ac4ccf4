"""While a console runs, and while what it started shuts down, log records go
to the debug log (``<state_dir>/debug.log``, the CLI's crash report's file),
never to the terminal.

Nothing in the console configures logging, so a warning or an error logged
anywhere (the service's "sink failed", an aiohttp server's "Error handling
request" as the demo's simulator closes, a Home Assistant read refused once
it is gone) went to Python's last-resort handler: swallowed by Textual while
the app ran, printed over the operator's shell after quit, traceback and all.
The records are written redacted (a token may be in an error's text) and
counted, so the command can say in one line where they went."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sparktui.core.redact import redact
from sparktui.ops.private import open_private, private_dir


class _Redacted(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


@dataclass
class Logged:
    path: Path
    count: int = 0
    """Records of WARNING and above written while it was installed."""

    def summary(self, prog: str) -> str:
        """One line for after the console closed ("" when nothing was logged)."""
        return (f"{prog}: {self.count} warning(s) or error(s) logged while it ran or shut "
                f"down: {self.path}" if self.count else "")


class _Counting(logging.StreamHandler[TextIO]):
    def __init__(self, stream: TextIO, logged: Logged) -> None:
        super().__init__(stream)
        self.logged = logged

    def emit(self, record: logging.LogRecord) -> None:
        self.logged.count += 1
        super().emit(record)


@contextlib.contextmanager
def logged_to_file(path: Path) -> Iterator[Logged]:
    """Every record of WARNING and above into ``path`` (0600, appended) for the
    block; the root logger's handlers as they were after."""
    private_dir(path.parent)
    fd = open_private(path, os.O_WRONLY | os.O_APPEND)
    logged = Logged(path)
    with os.fdopen(fd, "a", encoding="utf-8") as stream:
        handler = _Counting(stream, logged)
        handler.setLevel(logging.WARNING)
        handler.setFormatter(_Redacted("%(asctime)s %(name)s %(levelname)s %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        try:
            yield logged
        finally:
            root.removeHandler(handler)
            handler.flush()
