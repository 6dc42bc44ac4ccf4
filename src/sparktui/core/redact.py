"""The one redaction every string passes before it reaches output, the
journal or a log: the Home Assistant token (registered when it is loaded) and
anything shaped like a credential (an ``Authorization`` header value, a
``Bearer`` value, a JWT) are replaced by ``<redacted>``, whatever their source
(an error body echoed by Home Assistant or a proxy, an exception message)."""

from __future__ import annotations

import re
from typing import Any

MASK = "<redacted>"
_secrets: set[str] = set()
_PATTERNS = (
    # "Authorization": "Bearer x", Authorization: Bearer x, authorization=x
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:bearer\s+|basic\s+)?[^\s\"',;}]+"),
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"()\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"),
)


def register_secret(value: str) -> None:
    """Remember a secret (e.g. the token just loaded) so it is masked everywhere."""
    if len(value) >= 6:
        _secrets.add(value)


def redact(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


def redact_value(value: Any) -> Any:
    """`redact` applied to every string inside dicts, lists and tuples."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_value(k): redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value
