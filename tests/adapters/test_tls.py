"""Every HTTP client of the process shares one TLS context: httpx would load
the CA bundle for each (~40 ms of CPU on the event loop, per endpoint check
and canary round)."""

from __future__ import annotations

import ssl

import pytest

from sparktui.adapters import tls
from sparktui.adapters.engine_http import EngineClient
from sparktui.adapters.homeassistant import HomeAssistant, load_token


async def test_clients_build_the_tls_context_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []
    real = ssl.create_default_context

    def counted(*a: object, **kw: object) -> ssl.SSLContext:
        built.append(a or kw)
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    tls.client_tls.cache_clear()
    clients = [EngineClient("127.0.0.1", 8000 + i) for i in range(3)]
    monkeypatch.setenv("SPARKTUI_TEST_TLS_TOKEN", "t0ken-for-tls-test")
    token = load_token("SPARKTUI_TEST_TLS_TOKEN", "/nonexistent")
    ha = HomeAssistant("https://127.0.0.1:8123", token)
    try:
        assert len(built) == 1, built
        # verification stays on for the one client that may speak TLS
        assert tls.client_tls().verify_mode is ssl.CERT_REQUIRED
        assert tls.client_tls().check_hostname
    finally:
        for c in clients:
            await c.aclose()
        await ha.aclose()
