"""A lane's first fatal line (`Failure`), and the rules that pick it among
ranks whose streams arrive in any order: which line came first, and which of
the lines after a generic one ("EngineCore failed to start.") says why.
core/phases.PhaseTracker applies them as it reads."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparktui.core.logsig import Kind, LogEvent, parse_timestamp

AFTER_LINES = 20
"""Lines of the failed rank kept after its first fatal line (the root cause
often follows: vLLM prints "EngineCore failed to start." before the error)."""
GENERIC_FATAL = frozenset({
    Kind.ENGINE_FAILED, Kind.ENGINE_DEAD, Kind.WORKER_DIED, Kind.EXCEPTION, Kind.CONTAINER_EXIT,
})
"""Fatal kinds that say *that* the engine died rather than *why*."""


_EXCEPTION_CLASS = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception): ")
"""``torch.OutOfMemoryError: `` before an exception's message."""


@dataclass(frozen=True)
class Failure:
    """The first fatal line of the lane."""

    rank: int
    kind: Kind
    line: str
    timestamp: str | None
    context: tuple[str, ...]
    """The lines of that rank just before the fatal one (oldest first)."""
    cause: str | None = None
    """A more specific fatal line of the same rank right after a generic one."""
    cause_rank: int = 0
    """How well ``cause`` says why (`cause_rank`): a better line replaces it."""
    cause_kind: Kind | None = None
    """The kind of ``cause``'s line."""
    after: tuple[str, ...] = ()
    """Lines of that rank after the fatal one (up to AFTER_LINES)."""
    engine_time: float | None = None
    """The engine's own stamp of the line (core/enginetime.py), None without one."""

    def read_past(self) -> float | None:
        """Epoch seconds every rank's log must be read past before this is
        the lane's first fatal line: docker's time of the line, and the end
        of the engine's second (its stamp has no fraction)."""
        docker = parse_timestamp(self.timestamp)
        if self.engine_time is None:
            return docker
        return max(docker or 0.0, self.engine_time + 1.0)

    @property
    def why(self) -> Kind:
        """The kind that says why the lane died, for its next step: the cause's
        when it is a specific line (``WorkerProc failed to start.`` then ``CUDA
        error: out of memory``: the OOM's advice, not "read the log")."""
        if self.cause_kind is not None and self.cause_kind not in GENERIC_FATAL:
            return self.cause_kind
        return self.kind

    def describe(self) -> str:
        text = f"rank {self.rank}: {self.line}"
        return f"{text} (cause: {self.cause})" if self.cause else text

    def brief(self) -> str:
        """Why, in few words: ``rank 0: RPC call to sample_tokens timed out.``,
        the cause when there is one (it says why; the line often only that the
        engine died), without a Python exception's class name."""
        return f"rank {self.rank}: {_EXCEPTION_CLASS.sub('', self.cause or self.line, 1)}"

    def to_json(self) -> dict[str, object]:
        return {"rank": self.rank, "kind": self.kind.value, "line": self.line,
                "timestamp": self.timestamp, "cause": self.cause}


def earlier(ts: str | None, engine: float | None, rank: int | None, than: Failure) -> bool:
    """Did a line of ``rank`` stamped ``ts`` by docker and ``engine`` by the
    engine come before the failure ``than``? The engines' own stamps decide
    when both have one and they differ (they are whole seconds); otherwise
    docker's (by time, not text: docker trims trailing zeros, so ``.4Z`` sorts
    after ``.45Z`` as text); a tie goes to the lower rank, so the verdict does
    not depend on which stream arrived first (``rank`` None: a tie never wins,
    as for a container's exit, which follows its own rank's lines)."""
    if engine is not None and than.engine_time is not None and engine != than.engine_time:
        return engine < than.engine_time
    a, b = parse_timestamp(ts), parse_timestamp(than.timestamp)
    if a is None or b is None:
        return False
    return a < b or (a == b and rank is not None and rank < than.rank)


def cause_rank(ev: LogEvent) -> int:
    """How well a line after a generic fatal one says why (0: not at all).

    3: a specific fatal line (``TimeoutError: RPC call to sample_tokens timed
    out.``, an ``assert self.page_size_padded >= ...`` source line); 2: an
    exception with a message; 1: a bare exception (``TimeoutError``). A frame
    or its ``raise X(...)`` line is never one (Kind.FRAME), nor an indented
    exception-shaped line. In a chain (``raise X(...) from e``) the outer
    exception comes last and names the operation, so among exceptions with a
    message the later wins, and a specific line beats any exception."""
    if ev.fatal and ev.kind not in GENERIC_FATAL:
        return 3
    if ev.kind is not Kind.EXCEPTION or ev.text[:1] in (" ", "\t"):
        return 0
    return 2 if ev.fields.get("error") else 1
