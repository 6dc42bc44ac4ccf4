"""The one TLS context every HTTP client of the process shares.

httpx builds a fresh `ssl.SSLContext` for every `AsyncClient` (it loads the
whole CA bundle): ~40 ms of CPU on the event loop, paid per endpoint check
and canary round, since each opens its own client. The context is the same
every time (certifi's bundle, the environment not consulted, as the clients
are built with ``trust_env=False``), so it is built once, on first use.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def client_tls() -> ssl.SSLContext:
    """What httpx would build for ``verify=True, trust_env=False``."""
    return httpx.create_ssl_context(trust_env=False)
