"""Timestamps and durations exactly as the real tools print them."""

from __future__ import annotations

from datetime import UTC, datetime


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def rfc3339nano(t: float) -> str:
    """Docker's log timestamp, zero-padded to nanoseconds: 2026-11-29T22:00:01.123456000Z."""
    d = _dt(t)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond:06d}000Z"


def rfc3339nano_trimmed(t: float) -> str:
    """Go's time.RFC3339Nano (trailing zeros trimmed), as in docker inspect."""
    d = _dt(t)
    frac = f"{d.microsecond:06d}000".rstrip("0")
    return d.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def journal_precise(t: float) -> str:
    """journalctl -o short-iso-precise (systemd >= 255 offset form)."""
    d = _dt(t)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond:06d}+00:00"


def docker_created(t: float) -> str:
    """docker ps CreatedAt: 2026-11-29 22:00:01 +0000 UTC."""
    return _dt(t).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def iso_ha(t: float) -> str:
    """Home Assistant's last_changed: 2026-11-29T22:00:01.123456+00:00."""
    return _dt(t).isoformat(timespec="microseconds")


def human_duration(seconds: float) -> str:
    """go-units HumanDuration, as in `Up 5 minutes` and `Exited (0) About an hour ago`."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    minutes = int(seconds / 60)
    if minutes == 1:
        return "About a minute"
    if minutes < 60:
        return f"{minutes} minutes"
    hours = int(seconds / 3600 + 0.5)
    if hours == 1:
        return "About an hour"
    if hours < 48:
        return f"{hours} hours"
    if hours < 24 * 7 * 2:
        return f"{hours // 24} days"
    if hours < 24 * 30 * 2:
        return f"{hours // 24 // 7} weeks"
    if hours < 24 * 365 * 2:
        return f"{hours // 24 // 30} months"
    return f"{int(seconds / 3600) // 24 // 365} years"


def parse_since(value: str, now: float) -> float | None:
    """docker logs --since: RFC 3339, Unix seconds, or a relative duration (10m, 1h30m)."""
    import re

    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    m = re.fullmatch(r"((\d+)h)?((\d+)m)?((\d+(\.\d+)?)s)?", value)
    if m and value:
        h, mi, s = float(m.group(2) or 0), float(m.group(4) or 0), float(m.group(6) or 0)
        return now - (h * 3600 + mi * 60 + s)
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
