"""`HomeAssistant.notify`: the phone-alert call, with the plug calls' manners."""

from __future__ import annotations

import json

import httpx
import pytest

from sparktui.adapters.homeassistant import HomeAssistant, HomeAssistantError, load_token

TOKEN = "q7Zx-test-token-0123456789"


def client(monkeypatch: pytest.MonkeyPatch, handler) -> tuple[HomeAssistant, list]:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SPARKTUI_TEST_TOKEN", TOKEN)
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    ha = HomeAssistant("http://127.0.0.1:8123", load_token("SPARKTUI_TEST_TOKEN", "/nonexistent"),
                       transport=httpx.MockTransport(record), timeout_s=1.0)
    return ha, seen


async def test_notify_posts_title_and_message(monkeypatch: pytest.MonkeyPatch) -> None:
    ha, seen = client(monkeypatch, lambda r: httpx.Response(200, json=[]))
    async with ha:
        await ha.notify("notify.mobile_app_pixel_8", "sparktui THRASH dgx6", "dgx6: ...")
    (req,) = seen
    assert req.method == "POST" and req.url.path == "/api/services/notify/mobile_app_pixel_8"
    assert json.loads(req.content) == {"title": "sparktui THRASH dgx6", "message": "dgx6: ..."}
    assert req.headers["Authorization"] == f"Bearer {TOKEN}"


async def test_a_refused_token_is_an_error_without_the_token(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ha, _ = client(monkeypatch, lambda r: httpx.Response(401, text=f"401: {TOKEN}"))
    async with ha:
        with pytest.raises(HomeAssistantError) as info:
            await ha.notify("notify.mobile_app_pixel_8", "t", "m")
    assert "401" in str(info.value) and TOKEN not in str(info.value)


async def test_a_hung_home_assistant_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    ha, _ = client(monkeypatch, hang)
    async with ha:
        with pytest.raises(HomeAssistantError, match="no answer within"):
            await ha.notify("notify.mobile_app_pixel_8", "t", "m")


@pytest.mark.parametrize("service", ["switch.dgx6", "notify.", "notify.a/b", "notify.x y"])
async def test_not_a_notify_service_sends_nothing(monkeypatch: pytest.MonkeyPatch,
                                                  service: str) -> None:
    ha, seen = client(monkeypatch, lambda r: httpx.Response(200, json=[]))
    async with ha:
        with pytest.raises(HomeAssistantError, match="not a notify service"):
            await ha.notify(service, "t", "m")
    assert seen == []


@pytest.mark.parametrize(("service", "data"), [
    ("notify.mobile_app_pixel_8", {"tag": "sparktui-thrash-dgx6"}),
    ("notify.persistent_notification", {"notification_id": "sparktui-thrash-dgx6"}),
    ("notify.telegram", None),  # its data keys are its own: none sent
])
async def test_an_incidents_messages_carry_its_tag_where_the_platform_has_one(
        monkeypatch: pytest.MonkeyPatch, service: str, data: dict[str, str] | None) -> None:
    ha, seen = client(monkeypatch, lambda r: httpx.Response(200, json=[]))
    async with ha:
        await ha.notify(service, "sparktui THRASH dgx6", "dgx6: ...", tag="sparktui-thrash-dgx6")
        await ha.notify(service, "t", "m")
    assert json.loads(seen[0].content).get("data") == data
    assert "data" not in json.loads(seen[1].content)
