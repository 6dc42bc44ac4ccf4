"""The one redaction every string passes before it reaches output, the
journal or a log: the Home Assistant token (registered when it is loaded) and
anything shaped like a credential (an ``Authorization`` header value, a
``Bearer`` value, a JWT) are replaced by ``<redacted>``, whatever their source
(an error body echoed by Home Assistant or a proxy, an exception message).

A secret is masked in its derived forms too (issue 27: an HA error body that
echoed the token's first 12 characters, or its base64 form, was printed,
journaled and bundled): any run of 6 or more characters that begins the token
or one of its encodings (standard and URL-safe base64, with or without
padding, URL-encoding). A token too short for that to mean anything is refused
when it is loaded (``MIN_TOKEN_CHARS``)."""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "<redacted>"
PREFIX_CHARS = 6
"""A run this long that begins a secret (or an encoding of it) is masked."""
MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused at load: a Home Assistant long-lived token is ~180
characters, and a short one's prefixes would match ordinary words."""
_secrets: set[str] = set()
_PATTERNS = (
    # "Authorization": "Bearer x", Authorization: Bearer x, authorization=x
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:bearer\s+|basic\s+)?[^\s\"',;}]+"),
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"()\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"),
)


def derived_forms(secret: str) -> set[str]:
    """The secret and the encodings of it an echoing peer may send back."""
    raw = secret.encode()
    forms = {secret, quote(secret, safe=""), quote_plus(secret)}
    for enc in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        forms |= {enc.decode(), enc.decode().rstrip("=")}
    return {f for f in forms if len(f) >= PREFIX_CHARS}


def register_secret(value: str) -> None:
    """Remember a secret (e.g. the token just loaded) so it and its derived forms
    are masked everywhere. ValueError for one shorter than MIN_TOKEN_CHARS."""
    if len(value) < MIN_TOKEN_CHARS:
        raise ValueError(f"a secret of {len(value)} characters cannot be masked reliably "
                         f"(at least {MIN_TOKEN_CHARS})")
    _secrets.update(derived_forms(value))


def _mask_runs(text: str, form: str) -> str:
    """Mask every run of >= PREFIX_CHARS characters of ``text`` that begins ``form``."""
    head = form[:PREFIX_CHARS]
    if head not in text:
        return text
    out, i = [], 0
    while (j := text.find(head, i)) >= 0:
        k = j + PREFIX_CHARS
        while k < len(text) and k - j < len(form) and text[k] == form[k - j]:
            k += 1
        out += [text[i:j], MASK]
        i = k
    out.append(text[i:])
    return "".join(out)


def redact(text: str) -> str:
    for form in sorted(_secrets, key=len, reverse=True):
        text = _mask_runs(text, form)
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
