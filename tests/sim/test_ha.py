"""Home Assistant: auth, the REST shapes, switch state driving node power, faults."""

from __future__ import annotations

import asyncio
import os
import re
import stat

import httpx
import pytest

from .conftest import exec_on


def client(sim, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.AsyncClient(base_url=sim.endpoints()["ha_url"], headers=headers, timeout=5)


async def test_auth_and_shapes(sim):
    token_file = sim.token_file
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    token = token_file.read_text()
    async with client(sim) as anon:
        r = await anon.get("/api/")
        assert (r.status_code, r.text) == (401, "401: Unauthorized")
    async with client(sim, "wrong") as bad:
        assert (await bad.get("/api/states/switch.dgx1")).status_code == 401
    async with client(sim, token) as ha:
        assert (await ha.get("/api/")).json() == {"message": "API running."}
        state = (await ha.get("/api/states/switch.dgx1")).json()
        assert list(state) == ["entity_id", "state", "attributes", "last_changed",
                               "last_reported", "last_updated", "context"]
        assert state["state"] == "on" and state["attributes"] == {"friendly_name": "Dgx1"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00",
                            state["last_changed"])
        assert re.fullmatch(r"01[0-9A-HJKMNP-TV-Z]{24}", state["context"]["id"])
        missing = await ha.get("/api/states/switch.nope")
        assert (missing.status_code, missing.json()) == (404, {"message": "Entity not found."})
        bad_json = await ha.post("/api/services/switch/turn_on", content=b"{nope")
        assert (bad_json.status_code, bad_json.json()) == (
            400, {"message": "Data should be valid JSON."})
        unknown = await ha.post("/api/services/switch/explode", json={"entity_id": "switch.dgx1"})
        assert (unknown.status_code, unknown.text) == (400, "400: Bad Request")


async def test_plug_off_and_on_power_cycles_the_node(sim, serve):
    token = sim.token_file.read_text()
    await serve(sim, "glm53-flash-eugr-2x")
    await sim.advance(30)
    async with client(sim, token) as ha:
        r = await ha.post("/api/services/switch/turn_off", json={"entity_id": "switch.dgx2"})
        assert r.status_code == 200
        assert [s["state"] for s in r.json()] == ["off"]
        again = await ha.post("/api/services/switch/turn_off", json={"entity_id": "switch.dgx2"})
        assert again.json() == []
    ep = sim.endpoints()["nodes"]["dgx2"]
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", ep["port"])
    with pytest.raises(OSError):
        await asyncio.open_connection(ep["api_host"], ep["liveness_port"])
    await sim.advance(3 * 3600)  # rank 0 on dgx1 finds its peer gone at the next collective
    logs, _, _ = await exec_on(sim, "dgx1",
                               "docker logs sparktui-glm53-flash-eugr-2x-r0 2>&1 | cat")
    # the head sees only its own worker: an NCCL error, never the remote rank by name
    assert "DistBackendError: NCCL error in: " in logs and "VllmWorker-1" not in logs
    async with client(sim, token) as ha:
        await ha.post("/api/services/switch/turn_on", json={"entity_id": "switch.dgx2"})
    await sim.advance(10)
    assert sim.nodes["dgx2"].power == "booting"
    await sim.advance(60)
    out, _, status = await exec_on(sim, "dgx2", "docker ps -a -q; cat /proc/uptime")
    assert status == 0
    assert float(out.split()[0]) < 120  # freshly booted, no containers left


async def test_faults_500_hang_unavailable(sim):
    token = sim.token_file.read_text()
    async with client(sim, token) as ha:
        sim.inject("ha-500")
        r = await ha.get("/api/")
        assert r.status_code == 500
        sim.inject("ha-hang")
        with pytest.raises(httpx.ReadTimeout):
            await ha.get("/api/", timeout=0.3)
        sim.inject("ha-ok")
        sim.inject("unavailable", "switch.dgx3")
        state = (await ha.get("/api/states/switch.dgx3")).json()
        assert state["state"] == "unavailable"
        assert state["attributes"]["restored"] is True
        r = await ha.post("/api/services/switch/turn_off", json={"entity_id": "switch.dgx3"})
        assert (r.status_code, r.json()) == (200, [])
    assert sim.nodes["dgx3"].up  # silently skipped, as Home Assistant does


async def test_a_plug_off_at_start_keeps_its_node_dark_until_turned_on():
    from sparktui.sim.spec import small_spec
    from sparktui.sim.testing import running_sim

    spec = small_spec(2)
    spec.entities["switch.node2"].state = "off"
    async with running_sim(spec=spec) as sim:
        ep = sim.endpoints()["nodes"]["node2"]
        assert ep["port"] > 0 and ep["liveness_port"] > 0  # published even while dark
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", ep["port"])
        await sim.power("node2", True)
        await sim.advance(60)
        out, _, _ = await exec_on(sim, "node2", "uname -r")
        assert out == "6.17.0-1031-nvidia\n"
        assert sim.endpoints()["nodes"]["node2"] == ep  # same ports after the boot


async def test_ip_ban_after_n_failed_logins_and_the_502_echo(sim):
    """The simulator bans like a real Home Assistant with ip_ban_enabled (403 to
    everything, even a good token), and its 502 proxy echoes the request headers."""
    token = sim.token_file.read_text()
    sim.ha.ip_ban_threshold = 2
    async with client(sim, "wrong") as bad:
        assert (await bad.get("/api/")).status_code == 401
        assert (await bad.get("/api/")).status_code == 401
        assert (await bad.get("/api/")).status_code == 403
    async with client(sim, token) as good:
        assert (await good.get("/api/")).status_code == 403
    assert sim.ha.banned == {"127.0.0.1"}
    sim.ha.banned.clear()  # the operator removes ip_bans.yaml (else teardown fails the test)
    sim.inject("ha-502-echo")
    async with client(sim, token) as good:
        r = await good.get("/api/states/switch.dgx1")
    assert r.status_code == 502 and f"Authorization: Bearer {token}" in r.text


async def test_a_refused_token_reaches_the_simulated_ha_once_and_is_never_banned(sim, tmp_path):
    from sparktui.adapters.homeassistant import AuthRefused, HomeAssistant, load_token

    wrong = tmp_path / "token"
    wrong.write_text("not-the-token-123")
    wrong.chmod(0o600)
    before = sim.ha.requests
    async with HomeAssistant(sim.endpoints()["ha_url"], load_token("", wrong)) as ha:
        for _ in range(3):  # a command, then two more reads by the same client
            results = await asyncio.gather(*(ha.state(f"switch.dgx{i}") for i in range(1, 9)),
                                           return_exceptions=True)
            assert all(isinstance(r, AuthRefused) for r in results)
    assert sim.ha.requests - before == 1 and not sim.ha.banned
