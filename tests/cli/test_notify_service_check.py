"""`sparktui check` looks the configured [notify] service up in Home Assistant
(`GET /api/services`, against the simulated one): a service that does not exist
fails check naming the ones that do; one that exists passes; a Home Assistant
that cannot be asked is a warning. The sentinel says the same at its start."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from sparktui.core.config import Config
from sparktui.core.config_load import load_config

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).resolve().parents[1] / "ops" / "cli_harness.py")
assert _spec is not None and _spec.loader is not None
h = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(h)


def with_notify(tmp_path: Path, service: str) -> Config:
    cfg = h.fleet(tmp_path)
    text = cfg.path.read_text().replace('service = ""', f'service = "{service}"', 1)
    cfg.path.write_text(text)
    return load_config(cfg.path)


async def test_a_missing_notify_service_fails_check_with_the_existing_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = with_notify(tmp_path, "notify.mobile_app_pixel")
    async with h.published(cfg) as sim:
        assert await h.sparktui(cfg, "check", "--json", monkeypatch=monkeypatch) == 1
        out = json.loads(capsys.readouterr().out)
        found = [e for e in out["errors"] if "notify.service" in e]
        assert len(found) == 1, out  # (a "could not check" warning instead says why)
        error = found[0]
        line = next(i for i, text in enumerate(cfg.path.read_text().splitlines(), start=1)
                    if text.startswith('service = "notify.mobile_app_pixel"'))
        assert error.startswith(f"{cfg.path}:{line}: notify.service: "), error  # file:line:key
        assert "notify.mobile_app_pixel does not exist in Home Assistant" in error
        assert "notify.mobile_app_pixel_8, notify.persistent_notification" in error
        assert not sim.ha.notifications  # looked up, nothing sent
        cfg.path.write_text(cfg.path.read_text().replace(
            'service = "notify.mobile_app_pixel"', 'service = "notify.mobile_app_pixel_8"'))
        assert await h.sparktui(cfg, "check", "--json", monkeypatch=monkeypatch) == 0
        out = json.loads(capsys.readouterr().out)
        assert not any("notify" in w for w in out["warnings"] + out["errors"])
    # the simulator gone: check still validates the files, and says what it could not ask
    assert await h.sparktui(cfg, "check", monkeypatch=monkeypatch) == 0
    captured = capsys.readouterr()
    assert "could not check notify.mobile_app_pixel_8 in Home Assistant" in captured.out
    assert "Traceback" not in captured.err


async def test_the_simulated_home_assistant_refuses_an_unknown_notify_service(
        tmp_path: Path) -> None:
    import httpx
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        url = f"http://127.0.0.1:{sim.ha_port}"
        headers = {"Authorization": f"Bearer {sim.ha.token}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=5) as client:
            bad = await client.post("/api/services/notify/nope", json={"message": "m"})
            assert bad.status_code == 400
            good = await client.post("/api/services/notify/mobile_app_pixel_8",
                                     json={"message": "m"})
            assert good.status_code == 200
            listed = (await client.get("/api/services")).json()
            assert {d["domain"] for d in listed} >= {"notify", "switch"}
        assert [s for s, _ in sim.ha.notifications] == ["notify.mobile_app_pixel_8"]
