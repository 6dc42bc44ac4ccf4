"""The values a signature's fields and docker's stamps hold: counts with
thousands separators, tqdm's binary sizes, floats, RFC 3339 timestamps."""

from __future__ import annotations

import re
from datetime import datetime


def parse_int(value: str | None) -> int | None:
    """``"1,234,567"`` -> 1234567; None when absent or malformed."""
    if value is None:
        return None
    try:
        return int(value.replace(",", ""))
    except ValueError:
        return None


_SIZE = re.compile(r"([\d.]+)([kMGTPEZY]?)")
_SIZE_UNITS = "kMGTPEZY"


def parse_mib(size: str | None) -> int | None:
    """tqdm's binary size (``unit_divisor=1024``: ``188G``, ``5.00G``, ``512M``,
    ``0.00``) in MiB; None when it is not one."""
    m = _SIZE.fullmatch(size or "")
    if m is None:
        return None
    try:
        value = float(m.group(1))
    except ValueError:
        return None
    power = _SIZE_UNITS.index(m.group(2)) + 1 if m.group(2) else 0
    return round(value * 1024 ** power / 1024 ** 2)


def parse_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def parse_timestamp(ts: str | None) -> float | None:
    """RFC 3339 (docker ``--timestamps``, journald ``short-iso-precise``) to
    epoch seconds; nanoseconds are truncated to microseconds."""
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None
