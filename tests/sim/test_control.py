"""The control API (set_scenario), SGLang lanes, and docker's edge answers."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from sparktui.sim.timefmt import rfc3339nano

from .conftest import exec_on, logs_cmd


async def test_set_scenario_changes_the_running_world(sim):
    out, _, _ = await exec_on(sim, "dgx8", "uname -r; stat -c '%F' /home/kilork/.cache/huggingface")
    assert out == "6.17.0-1031-nvidia\nsymbolic link\n"
    sim.set_scenario("bad-kernel")
    out, _, _ = await exec_on(sim, "dgx8", "uname -r")
    assert out == "7.0.0-1019-nvidia\n"
    sim.set_scenario("cache-not-symlink")
    out, _, _ = await exec_on(sim, "dgx8", "uname -r; stat -c '%F' /home/kilork/.cache/huggingface")
    assert out == "6.17.0-1031-nvidia\ndirectory\n"  # back to the pinned kernel
    sim.set_scenario("switch-off")
    assert sim.spec.entities["switch.sw6_mt"].state == "off"
    sim.set_scenario("normal")
    assert sim.spec.entities["switch.sw6_mt"].state == "on"


async def test_sglang_lane_boots_and_serves(sim, serve):
    lane = "dsv41-flash-sglang-4x"
    results = await serve(sim, lane)
    assert all(r[3] == 0 for r in results), results
    await sim.advance(4 * 3600)
    logs, _, _ = await exec_on(sim, "dgx1", logs_cmd(f"sparktui-{lane}-r0"))
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Load weight begin\. avail mem=", logs)
    assert "The server is fired up and ready to roll!" in logs
    host = sim.nodes["dgx1"].api_host
    async with httpx.AsyncClient(base_url=f"http://{host}:30000", timeout=5) as client:
        assert (await client.get("/health")).status_code == 200
        metrics = (await client.get("/metrics")).text
    assert "sglang:num_running_reqs{" in metrics


async def test_logs_since_and_tail(sim, serve):
    lane = "glm53-full-mxfp4-4x-dspark8"
    await serve(sim, lane)
    await sim.advance(60)
    mark = sim.wall()
    await sim.advance(4 * 3600)
    name = f"sparktui-{lane}-r0"
    every, _, _ = await exec_on(sim, "dgx1", logs_cmd(name))
    later, _, _ = await exec_on(sim, "dgx1", f"docker logs --since {rfc3339nano(mark)} "
                                             f"--timestamps {name} 2>&1")
    assert 0 < len(later.splitlines()) < len(every.splitlines())
    assert every.endswith(later)
    tail, _, _ = await exec_on(sim, "dgx1", f"docker logs --tail 2 {name} 2>&1")
    assert tail.splitlines() == [re.sub(r"^\S+ ", "", x) for x in every.splitlines()[-2:]]


async def test_docker_edge_answers(sim):
    _, err, status = await exec_on(sim, "dgx1", "docker run -d --bogus x vllm serve m")
    assert (err, status) == ("unknown flag: --bogus\nSee 'docker run --help'.\n", 125)
    _, err, status = await exec_on(sim, "dgx1", "docker logs nope")
    assert (err, status) == ("Error response from daemon: No such container: nope\n", 1)
    _, err, status = await exec_on(sim, "dgx1", "docker frobnicate")
    assert status == 1 and err.startswith("docker: 'frobnicate' is not a docker command.")


async def test_same_seed_same_night(fleet, serve):
    async def run() -> tuple[list[str], str]:
        from sparktui.sim.testing import running_sim

        async with running_sim(fleet, scenario="boot-d-oom", seed=7) as s:
            ids = [r[1] for r in await serve(s, "dsv41-flash-r37-4x-eager")]
            await s.advance(600)
            logs, _, _ = await exec_on(s, "dgx1", logs_cmd("sparktui-dsv41-flash-r37-4x-eager-r0"))
            await s.advance(1400)  # dgx1 thrashes now: read its journal from the inside
            journal = "".join(s.nodes["dgx1"].journal.render(e)
                              for e in s.nodes["dgx1"].journal.entries)
            assert "NVRM" in journal
            return ids, logs + journal

    assert await run() == await run()


async def test_health_503_after_engine_death_then_port_closes(fleet, serve):
    from sparktui.sim.testing import running_sim

    lane = "glm53-mxfp4-fp8-4x-r39-196k"
    async with running_sim(fleet, scenario="long-prompt") as s:
        await serve(s, lane)
        await s.advance(3 * 3600)
        rank0 = s.lane_rank0(lane)
        s.run_prompt(lane, 150_000)
        while rank0.phase != "dead":
            await s.advance(1)
        url = f"http://{s.nodes['dgx5'].api_host}:8000/health"
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(url)).status_code == 503
            await s.advance(6)
            with pytest.raises(httpx.ConnectError):
                await client.get(url)


async def test_docker_ps_truncates_unless_told(sim, serve):
    await serve(sim, "glm53-flash-eugr-2x")
    out, _, _ = await exec_on(sim, "dgx1", "docker ps --format '{{json .}}'; docker ps -q")
    row = json.loads(out.splitlines()[0])
    assert len(row["ID"]) == 12 and out.splitlines()[1] == row["ID"]
    assert row["Command"] == '"vllm serve zai-org/…"'


async def test_memory_taken_outside_the_engines_still_thrashes_and_logs(sim):
    from sparktui.sim.memory import GIB

    sim.nodes["dgx6"].memory.set("hog", 125 * GIB)
    await sim.advance(30)
    node = sim.nodes["dgx6"]
    assert node.thrashing and node.memory.full.avg10 > 60
    assert any(e.message.startswith("NVRM: ") for e in node.journal.entries)
