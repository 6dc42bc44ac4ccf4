"""``host:port`` listen addresses for the servers the product opens (the
sentinel's ``/metrics``, the browser view), and the loopback rule they share.

Safe by default, as MiaAI-Lab/sparkDash does it: a server listens on loopback
unless the operator says otherwise, and a non-loopback address needs an explicit
opt-in (a flag or a token), because both servers name every node and lane.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1 (a name other than localhost is not:
    what it resolves to is not ours to trust)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> Listen:
    """``127.0.0.1:9464``, ``[::1]:9464``, ``localhost:8765`` -> `Listen`;
    raises ValueError saying what is wrong (the caller names the key or flag)."""
    raw = text
    text = text.strip()
    if text != raw or not text:
        raise ValueError(f"{raw!r} is not host:port (no spaces or newlines)")
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"{text!r} is not [ipv6]:port")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or ":" in host:
            raise ValueError(f"{text!r} is not host:port (IPv6 goes in brackets: [::1]:9464)")
    if not host:
        raise ValueError(f"{text!r} has no host (e.g. 127.0.0.1:{port_text or '9464'})")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"{text!r}: the host must be an IP address or localhost") from None
    if not port_text.isdigit() or len(port_text) > 5 or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return Listen(host, int(port_text))
