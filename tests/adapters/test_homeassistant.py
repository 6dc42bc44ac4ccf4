"""The Home Assistant adapter against a tiny aiohttp server speaking HA's REST
shapes: every change confirmed by re-reading; 401/500/hang/unavailable give
clear errors; the token never shows."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from sparktui.adapters.homeassistant import (
    AuthRefused,
    HomeAssistant,
    HomeAssistantError,
    NotConfirmed,
    SwitchUnavailable,
    TokenError,
    load_token,
)

TOKEN = "s3cret-long-lived-token-value"


class FakeHA:
    def __init__(self) -> None:
        self.states = {"switch.dgx6": "on", "switch.dgx7": "unavailable", "switch.stuck": "on"}
        self.fault = ""
        self.calls: list[tuple[str, str]] = []
        self.requests = 0
        self.release = asyncio.Event()
        """Set at teardown so a hung handler ends and the server can stop."""

    def obj(self, e: str) -> dict[str, object]:
        return {"entity_id": e, "state": self.states[e], "attributes": {},
                "last_changed": "2026-11-29T22:00:00.000000+00:00",
                "last_reported": "2026-11-29T22:00:00.000000+00:00",
                "last_updated": "2026-11-29T22:00:00.000000+00:00",
                "context": {"id": "01J", "parent_id": None, "user_id": None}}

    def app(self) -> web.Application:
        async def state(request: web.Request) -> web.Response:
            e = request.match_info["e"]
            if e not in self.states:
                return web.json_response({"message": "Entity not found."}, status=404)
            return web.json_response(self.obj(e))

        async def service(request: web.Request) -> web.Response:
            e = (await request.json())["entity_id"]
            svc = request.match_info["svc"]
            self.calls.append((svc, e))
            if self.states.get(e) in (None, "unavailable") or e == "switch.stuck":
                return web.json_response([])  # HA skips it silently
            self.states[e] = "on" if svc == "turn_on" else "off"
            return web.json_response([self.obj(e)])

        @web.middleware
        async def mw(request: web.Request, handler):  # type: ignore[no-untyped-def]
            self.requests += 1
            if self.fault == "hang":
                await self.release.wait()
            if self.fault == "502-echo":  # a proxy that echoes the request it could not pass
                return web.Response(status=502, text="Bad Gateway\n" + "\n".join(
                    f"{k}: {v}" for k, v in request.headers.items()))
            if self.fault == "500":
                return web.Response(status=500, text="500: Internal Server Error")
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                return web.Response(status=401, text="401: Unauthorized")
            return await handler(request)

        app = web.Application(middlewares=[mw])
        app.router.add_get("/api/states/{e}", state)
        app.router.add_post("/api/services/switch/{svc}", service)
        return app


class Fast:
    """A clock whose sleeps take no time (the confirm loop's polls)."""

    def __init__(self) -> None:
        self.t = 0.0

    def time(self) -> float:
        return 1e9 + self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s
        await asyncio.sleep(0)


@pytest.fixture
async def ha_server() -> AsyncIterator[tuple[FakeHA, str]]:
    fake = FakeHA()
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield fake, f"http://127.0.0.1:{port}"
    fake.release.set()
    await runner.cleanup()


def token_file(tmp_path, mode: int, text: str = TOKEN):  # type: ignore[no-untyped-def]
    path = tmp_path / "ha_token"
    path.write_text(text + "\n")
    os.chmod(path, mode)
    return path


def client(url: str, tmp_path, timeout: float = 2.0) -> HomeAssistant:  # type: ignore[no-untyped-def]
    return HomeAssistant(url, load_token("NO_SUCH_VAR_X", token_file(tmp_path, 0o600)),
                         timeout_s=timeout, clock=Fast())


async def test_turn_off_then_on_is_confirmed_by_reading_the_state(ha_server, tmp_path):
    fake, url = ha_server
    async with client(url, tmp_path) as ha:
        assert (await ha.turn("switch.dgx6", False)).state == "off"
        assert (await ha.state("switch.dgx6")).powered is False
        assert (await ha.turn("switch.dgx6", True)).state == "on"
        assert (await ha.turn("switch.dgx6", True)).state == "on"  # already on: no call
    assert fake.calls == [("turn_off", "switch.dgx6"), ("turn_on", "switch.dgx6")]


async def test_unavailable_plug_is_refused_before_any_call(ha_server, tmp_path):
    fake, url = ha_server
    async with client(url, tmp_path) as ha:
        with pytest.raises(SwitchUnavailable, match=r"switch\.dgx7 is unavailable"):
            await ha.turn("switch.dgx7", False)
        assert (await ha.state("switch.dgx7")).powered is None
    assert fake.calls == []


async def test_a_200_empty_answer_that_changes_nothing_is_not_confirmed(ha_server, tmp_path):
    fake, url = ha_server
    async with client(url, tmp_path) as ha:
        with pytest.raises(NotConfirmed, match="still reads on"):
            await ha.turn("switch.stuck", False, confirm_timeout_s=3.0)
    assert fake.calls == [("turn_off", "switch.stuck")]


@pytest.mark.parametrize("fault,expect", [("500", "HTTP 500"), ("hang", "no answer within")])
async def test_500_and_hang_are_clear_errors(ha_server, tmp_path, fault, expect):
    fake, url = ha_server
    fake.fault = fault
    async with client(url, tmp_path, timeout=0.3) as ha:
        with pytest.raises(HomeAssistantError, match=expect):
            await ha.turn("switch.dgx6", False)
    assert fake.states["switch.dgx6"] == "on"


async def test_401_says_the_token_was_refused_without_showing_it(ha_server, tmp_path, caplog):
    _, url = ha_server
    caplog.set_level(logging.DEBUG)
    bad = load_token("NO_SUCH_VAR_X", token_file(tmp_path, 0o600, "wrong-token-abc-0123"))
    async with HomeAssistant(url, bad, timeout_s=2.0) as ha:
        with pytest.raises(HomeAssistantError, match="401 Unauthorized") as info:
            await ha.state("switch.dgx6")
        assert "wrong-token-abc-0123" not in str(info.value)
        assert "wrong-token-abc-0123" not in repr(ha) and "wrong-token-abc-0123" not in repr(bad)
    async with client(url, tmp_path) as ha:
        await ha.turn("switch.dgx6", False)
    assert TOKEN not in caplog.text and "wrong-token-abc-0123" not in caplog.text


async def test_unknown_entity_and_bad_entity_ids(ha_server, tmp_path):
    _, url = ha_server
    async with client(url, tmp_path) as ha:
        with pytest.raises(HomeAssistantError, match="404: Home Assistant has no entity"):
            await ha.state("switch.nope")
        with pytest.raises(HomeAssistantError, match="not an entity id"):
            await ha.state("switch.x/../../api")


def test_token_from_env_first_then_a_private_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKTUI_TEST_TOKEN", "from-env-0123456789")
    from_env = load_token("SPARKTUI_TEST_TOKEN", tmp_path / "none")
    assert from_env.header() == "Bearer from-env-0123456789"
    monkeypatch.delenv("SPARKTUI_TEST_TOKEN")
    loose = token_file(tmp_path, 0o644)
    with pytest.raises(TokenError, match=r"mode 0644.*chmod 600") as info:
        load_token("SPARKTUI_TEST_TOKEN", loose)
    assert TOKEN not in str(info.value)
    os.chmod(loose, 0o600)
    assert load_token("SPARKTUI_TEST_TOKEN", loose).header() == f"Bearer {TOKEN}"
    with pytest.raises(TokenError, match="does not exist"):
        load_token("SPARKTUI_TEST_TOKEN", tmp_path / "missing")
    token_file(tmp_path, 0o600, "")
    with pytest.raises(TokenError, match="is empty"):
        load_token("SPARKTUI_TEST_TOKEN", tmp_path / "ha_token")


async def test_a_refused_token_costs_exactly_one_request(ha_server, tmp_path):
    """Eight plugs read at once with a refused token: one request reaches Home
    Assistant, the rest end without sending (ip_ban counts failed logins)."""
    fake, url = ha_server
    bad = load_token("NO_SUCH_VAR_X", token_file(tmp_path, 0o600, "wrong-token-def-0123"))
    async with HomeAssistant(url, bad, timeout_s=2.0, clock=Fast()) as ha:
        results = await asyncio.gather(*(ha.state("switch.dgx6") for _ in range(8)),
                                       return_exceptions=True)
        assert all(isinstance(r, AuthRefused) for r in results)
        with pytest.raises(AuthRefused, match=r"401 Unauthorized.*not retried"):
            await ha.turn("switch.dgx6", False)
    assert fake.requests == 1 and fake.calls == []


async def test_a_502_echoing_the_authorization_header_never_shows_the_token(ha_server, tmp_path):
    fake, url = ha_server
    fake.fault = "502-echo"
    async with client(url, tmp_path) as ha:
        with pytest.raises(HomeAssistantError, match="HTTP 502") as info:
            await ha.state("switch.dgx6")
    assert TOKEN not in str(info.value) and "Bearer" not in str(info.value)
    assert "Authorization: <redacted>" in str(info.value)


async def test_connection_refused_names_the_url_and_what_to_check(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with client(url, tmp_path) as ha:
        with pytest.raises(HomeAssistantError) as info:
            await ha.state("switch.dgx6")
    message = str(info.value)
    assert f"connection refused at {url}" in message and "[home_assistant] url" in message
    assert "ConnectError" not in message and "attempts failed" not in message


async def test_404_names_the_config_key_that_holds_the_entity(ha_server, tmp_path):
    _, url = ha_server
    token = load_token("NO_SUCH_VAR_X", token_file(tmp_path, 0o600))
    async with HomeAssistant(url, token, clock=Fast(),
                             entity_keys={"switch.nope": "nodes.dgx6.switch"}) as ha:
        with pytest.raises(HomeAssistantError, match=r"no entity switch\.nope -> check "
                                                     r"nodes\.dgx6\.switch in config\.toml"):
            await ha.state("switch.nope")
