"""The last line of defence for secrets: while a command runs, everything
written to stdout/stderr and every log record pass through `core.redact.redact`
(the Home Assistant token once loaded, anything shaped like a credential),
whatever printed or logged it. Redaction where secrets enter stays; this only
catches what a future code path forgets. The console draws on the terminal
through ``sys.__stderr__`` (Textual) and is not affected."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from sparktui.core.redact import redact


class _Redacting:
    """A text stream whose writes are redacted; everything else is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _redacting_factory(make: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return record

    return factory


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """stdout, stderr and every log record redacted until the block ends."""
    out, err = sys.stdout, sys.stderr
    make = logging.getLogRecordFactory()
    sys.stdout, sys.stderr = _Redacting(out), _Redacting(err)
    logging.setLogRecordFactory(_redacting_factory(make))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
        logging.setLogRecordFactory(make)
