"""Errors that name where bad input came from: file, line and key for
configuration and recipes, node and command for remote operations."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file."""

    file: Path
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else f"{self.file}"
        return f"{where}: {self.key}: {self.message}"


class InputError(Exception):
    """A config or recipe file is invalid; carries every problem found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class RemoteError(Exception):
    """A command on a node failed or could not be run."""

    def __init__(self, node: str, command: str, message: str) -> None:
        self.node = node
        self.command = command
        self.message = message
        super().__init__(f"{node}: {command!r}: {message}")


class OperatorError(Exception):
    """A fault of the environment the operator can fix (a read-only or full
    journal, a refused token): its message says what happened and what to do,
    and is shown as one line, without a traceback."""


def describe_error(exc: BaseException, *, with_type: bool = False) -> str:
    """`exc` in words for the operator: never a repr such as ``TimeoutError()``,
    always redacted (an exception message may carry an echoed secret). The type
    name is added only when asked (an unexpected error) or when there is no text."""
    from .redact import redact

    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return redact(f"{exc.strerror}{where}")
    text = str(exc).strip()
    if isinstance(exc, TimeoutError) and not text:
        return "no answer in time (timed out)"
    name = type(exc).__name__
    if not text:
        return name
    return redact(f"{name}: {text}" if with_type else text)
