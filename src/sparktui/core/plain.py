"""Validators for values that end up in a remote shell command.

Everything rendered into a command is also `shlex.quote`d; these checks make
sure a config or recipe cannot smuggle anything but a plain value there in the
first place (the launcher's own rule: recipes cannot inject shell).
"""

from __future__ import annotations

import ipaddress
import re

_PATTERNS: dict[str, re.Pattern[str]] = {
    "name": re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,62}"),
    "user": re.compile(r"[a-z_][a-z0-9_\-]{0,31}"),
    "hostname": re.compile(r"[A-Za-z0-9]([A-Za-z0-9\-.]{0,252}[A-Za-z0-9])?"),
    "abs_path": re.compile(r"/[A-Za-z0-9._/\-@+]*"),
    "env_name": re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}"),
    "env_value": re.compile(r"[A-Za-z0-9._,:/=@+%\-]*"),
    "image": re.compile(
        r"[a-z0-9]+([._\-/][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._\-][a-z0-9]+)*)*"
        r"(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?(@sha256:[0-9a-f]{64})?"
    ),
    "model_repo": re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*/[A-Za-z0-9][A-Za-z0-9._\-]*"),
    "revision": re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,127}"),
    "entity": re.compile(r"switch\.[a-z0-9_]+"),
    "kernel": re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(-[0-9]+)?(-[A-Za-z0-9]+)*"),
    "arg": re.compile(r"[A-Za-z0-9._,:/=@+%\-{}\"\[\] ]*"),
}


def check(kind: str, value: str) -> str | None:
    """Return why `value` is not a plain `kind`, or None when it is."""
    if kind == "ip":
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return f"{value!r} is not an IP address"
        return None
    if kind == "host":
        if check("ip", value) is None or _PATTERNS["hostname"].fullmatch(value):
            return None
        return f"{value!r} is not a host name or IP address"
    if kind == "abs_path" and ".." in value.split("/"):
        return f"{value!r} must not contain '..'"
    pattern = _PATTERNS[kind]
    if pattern.fullmatch(value):
        return None
    return f"{value!r} is not a plain {kind.replace('_', ' ')} (allowed: {pattern.pattern})"
