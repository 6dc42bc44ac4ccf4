"""What an HTTP client and a request cost on the event loop: every client of
the process shares one TLS context (httpx would load the CA bundle for each,
~40 ms per endpoint check and canary round), and a request imports nothing
(httpcore imports sniffio on every request; when it is missing, each attempt
searched sys.path)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.abc
import ssl
import sys
from collections.abc import Sequence
from types import ModuleType

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


class _Searches(importlib.abc.MetaPathFinder):
    """Counts the imports that reach the path search (a module not yet loaded)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> None:
        self.names.append(name)
        return None


async def test_a_request_searches_for_no_module() -> None:
    body = b'{"data": [{"id": "m"}]}'

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await reader.readuntil(b"\r\n\r\n"):  # keep-alive: each request
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with EngineClient("127.0.0.1", port) as client:
            assert await client.models() == ["m"]  # whatever loads once, loaded
            searches = _Searches()
            sys.meta_path.insert(0, searches)
            try:
                assert await client.models() == ["m"]
            finally:
                sys.meta_path.remove(searches)
    finally:
        server.close()
        await server.wait_closed()
    assert searches.names == []
