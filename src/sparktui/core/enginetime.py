"""The engine's own time of a log line (pure).

vLLM stamps its header ``INFO 11-30 22:45:01 [file.py:123]`` (no year,
seconds); SGLang ``[2026-11-30 22:45:01 TP0]`` (seconds). Both are the
node's clock when the engine wrote the line, read as UTC (a container's
default zone). A line without such a header (a raw traceback on stderr) has
no engine time: the caller falls back to docker's timestamp.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sparktui.core.logsig import parse_timestamp

_ANSI = r"(?:\x1b\[[0-9;]*m)*"
_VLLM = re.compile(
    rf"^{_ANSI}(?:\([^)]{{1,80}}\){_ANSI} )?{_ANSI}(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) \[")
_SGLANG = re.compile(rf"^{_ANSI}\[(\d{{4}})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[ \]])")
MAX_SKEW_S = 300.0
"""An engine time further than this from docker's is not the same clock
(a container in another time zone): it is not used."""


def engine_time(text: str, docker_ts: str | None) -> float | None:
    """Epoch seconds of the engine's own stamp on ``text`` (the line without
    docker's prefix), or None. vLLM's year is the one that puts the stamp
    nearest docker's time (a line of Dec 31 read on Jan 1)."""
    docker = parse_timestamp(docker_ts)
    if (m := _SGLANG.match(text)) is not None:
        t = _utc(*(int(g) for g in m.groups()))
    elif (m := _VLLM.match(text)) is not None:
        if docker is None:
            return None
        year = datetime.fromtimestamp(docker, UTC).year
        month, day, hh, mm, ss = (int(g) for g in m.groups())
        times = [t for y in (year - 1, year, year + 1)
                 if (t := _utc(y, month, day, hh, mm, ss)) is not None]
        t = min(times, key=lambda x: abs(x - docker)) if times else None
    else:
        return None
    if t is None or (docker is not None and abs(t - docker) > MAX_SKEW_S):
        return None
    return t


def _utc(year: int, month: int, day: int, hh: int, mm: int, ss: int) -> float | None:
    try:
        return datetime(year, month, day, hh, mm, ss, tzinfo=UTC).timestamp()
    except ValueError:  # Feb 30, hour 25: not a stamp
        return None
