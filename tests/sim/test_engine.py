"""A rendered recipe boots through vLLM's phases on the manual clock and then
serves real HTTP; docker reports its state as the real CLI does."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from .conftest import exec_on, logs_cmd

LANE = "glm53-full-mxfp4-4x-dspark8"  # 4nodes-switch, 376 GB, instanttensor, 9 GiB pin


async def health(sim, node: str, port: int = 8000) -> int | str:
    host = sim.nodes[node].api_host
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            return (await client.get(f"http://{host}:{port}/health")).status_code
    except httpx.ConnectError:
        return "refused"


async def test_boot_phases_then_http(sim, serve):
    results = await serve(sim, LANE)
    assert [r[3] for r in results] == [0, 0, 0, 0]
    assert all(re.fullmatch(r"[0-9a-f]{64}\n", r[1]) for r in results)
    await sim.advance(60)
    assert await health(sim, "dgx1") == "refused"  # uvicorn is not up during the load
    ps, _, _ = await exec_on(sim, "dgx1", "docker ps -a --no-trunc --format '{{json .}}'")
    row = json.loads(ps.splitlines()[0])
    assert list(row) == sorted(row)
    assert row["Names"] == f"sparktui-{LANE}-r0" and row["State"] == "running"
    assert row["Status"] == "Up About a minute"
    assert "sparktui.rank=0" in row["Labels"].split(",")
    await sim.advance(4 * 3600)
    assert await health(sim, "dgx1") == 200
    logs, _, _ = await exec_on(sim, "dgx1", logs_cmd(f"sparktui-{LANE}-r0"))
    # vLLM 0.33 runs Model Runner V2 (v1/worker/gpu/model_runner.py:399), logo first
    for needle in ("[model_runner.py:399] Loading model from scratch...",
                   "version 0.33.0", "[startup.py:96] non-default args: ",
                   "Loading safetensors using InstantTensor loader",
                   "GPU KV cache size: ", "Graph capturing finished in",
                   "INFO:     Application startup complete."):
        assert needle in logs, needle
    first = logs.splitlines()[0]
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \(APIServer pid=1\) INFO "
                    r"\d\d-\d\d \d\d:\d\d:\d\d \[startup\.py:38\] $", first)  # the logo's header
    assert "Uvicorn running on" not in logs  # vLLM starts uvicorn without that line
    took = re.search(r"Model loading took ([\d.]+) GiB memory and ([\d.]+) seconds", logs)
    assert took and float(took.group(1)) == pytest.approx(376e9 / 4 / 2**30, abs=0.01)
    # every rank streams the whole 376 GB checkpoint at 130 MB/s per node (4 loaders share
    # the NAS's 1 GB/s): ~48 min, the seeds' "~50 min NFS load 376 GB/rank at ~130 MB/s"
    assert float(took.group(2)) == pytest.approx(376e9 / 130e6, rel=0.02)
    kv = re.search(r"GPU KV cache size: ([\d,]+) tokens, Maximum concurrency for 131,072 tokens "
                   r"per request: ([\d.]+)x", logs)
    assert kv is not None
    assert int(kv.group(1).replace(",", "")) == 9 * 2**30 // (60688 + 5500)


async def test_http_endpoints_after_boot(sim, serve):
    await serve(sim, LANE)
    await sim.advance(4 * 3600)
    host = sim.nodes["dgx1"].api_host
    async with httpx.AsyncClient(base_url=f"http://{host}:8000", timeout=5) as client:
        models = (await client.get("/v1/models")).json()
        assert models["object"] == "list"
        assert models["data"][0]["id"] == "RedHatAI/GLM-5.3-MXFP4"
        assert models["data"][0]["max_model_len"] == 131072
        assert models["data"][0]["owned_by"] == "vllm"
        req = sim.run_prompt(LANE, 1000, max_tokens=30)
        await sim.advance(10)
        assert req.done and not req.error
        metrics = (await client.get("/metrics")).text
        assert 'vllm:prompt_tokens_total{engine="0",model_name="RedHatAI/GLM-5.3-MXFP4"} 1000.0' \
            in metrics
        assert "# TYPE vllm:num_requests_running gauge" in metrics
        assert "vllm:time_to_first_token_seconds_bucket{" in metrics
    for rank_node in ("dgx2", "dgx3", "dgx4"):
        assert await health(sim, rank_node) == "refused"  # headless ranks serve no HTTP


async def test_chat_completion_over_http(sim, serve):
    import asyncio

    await serve(sim, LANE)
    await sim.advance(4 * 3600)
    host = sim.nodes["dgx1"].api_host
    async with httpx.AsyncClient(base_url=f"http://{host}:8000", timeout=10) as client:
        task = asyncio.create_task(client.post("/v1/chat/completions", json={
            "model": "RedHatAI/GLM-5.3-MXFP4", "max_tokens": 8,
            "messages": [{"role": "user", "content": "hello " * 40}]}))
        while not task.done():
            await sim.advance(1)
        body = (await task).json()
    assert body["usage"] == {"prompt_tokens": 60, "completion_tokens": 8, "total_tokens": 68}


async def test_streaming_chat_sends_the_first_token_after_prefill(sim, serve):
    import asyncio

    await serve(sim, LANE)
    await sim.advance(4 * 3600)
    host = sim.nodes["dgx1"].api_host
    body = {"model": "RedHatAI/GLM-5.3-MXFP4", "max_tokens": 60, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}

    async def settled(fut: asyncio.Future[str], step: float) -> str:
        while not fut.done():
            await sim.advance(step)
        return fut.result()

    async with httpx.AsyncClient(base_url=f"http://{host}:8000", timeout=10) as client, \
            client.stream("POST", "/v1/chat/completions", json=body) as resp:
        lines = resp.aiter_lines()
        first = await settled(asyncio.ensure_future(anext(lines)), 0.5)
        assert json.loads(first.removeprefix("data: "))["object"] == "chat.completion.chunk"
        rest: list[str] = []
        while not rest or rest[-1] != "data: [DONE]":
            rest.append(await settled(asyncio.ensure_future(anext(lines)), 1.0))
    assert rest[-1] == "data: [DONE]"


async def test_stop_rm_and_inspect(sim, serve):
    await serve(sim, LANE)
    await sim.advance(4 * 3600)
    name = f"sparktui-{LANE}-r0"
    out, err, status = await exec_on(sim, "dgx1", f"docker rm {name}")
    assert status == 1 and "container is running" in err
    out, _, status = await exec_on(sim, "dgx1", f"docker stop -t 30 {name}")
    assert (out, status) == (f"{name}\n", 0)
    await sim.advance(1)
    assert await health(sim, "dgx1") == "refused"
    fmt = "'{{json .State}}'"
    state, _, _ = await exec_on(sim, "dgx1", f"docker inspect --format {fmt} {name}")
    st = json.loads(state)
    assert (st["Status"], st["ExitCode"], st["OOMKilled"], st["Running"]) == ("exited", 0, False,
                                                                              False)
    full, _, _ = await exec_on(sim, "dgx1", f"docker inspect {name}")
    assert full.startswith("[\n    {\n        \"Id\": ")
    assert json.loads(full)[0]["Config"]["Labels"]["sparktui.lane"] == LANE
    # the other ranks lose their peer and die with PyTorch's NCCL error
    await sim.advance(30)
    logs, _, _ = await exec_on(sim, "dgx2", logs_cmd(f"sparktui-{LANE}-r1"))
    assert "DistBackendError: NCCL error in: " in logs
    assert "remote process exited or there was a network error" in logs
    out, _, status = await exec_on(sim, "dgx1", f"docker rm {name}; docker ps -a -q")
    assert status == 0


async def test_logs_follow_streams_new_lines(sim, serve):
    import asyncio

    from sparktui.sim.testing import connect

    await serve(sim, LANE)
    await sim.advance(5)
    async with connect(sim, "dgx1") as conn:
        proc = await conn.create_process(
            f"docker logs -f --tail 1 --timestamps sparktui-{LANE}-r0 2>&1")
        first = await asyncio.wait_for(proc.stdout.readline(), 5)
        assert "non-default args: " in first or "Loading model from scratch" in first
        await sim.advance(4 * 3600)
        seen = ""
        while "Application startup complete." not in seen:
            seen += await asyncio.wait_for(proc.stdout.readline(), 5)
        proc.close()


async def test_eight_way_load_is_slower_per_node(fleet, serve):
    from sparktui.sim.testing import running_sim

    async def load_seconds(lane: str, cluster: str) -> float:
        async with running_sim(fleet) as s:
            await serve(s, lane, cluster)
            await s.advance(4 * 3600)
            first = fleet.clusters[cluster].nodes[0]
            logs, _, _ = await exec_on(s, first, logs_cmd(f"sparktui-{lane}-r0"))
        m = re.search(r"Loading weights took ([\d.]+) seconds", logs)
        assert m is not None
        return float(m.group(1))

    lane = "glm53-full-native-8x-dspark8"  # 753.3 GB streamed by each of 8 ranks
    eight = await load_seconds(lane, "8nodes-switch")
    # ~1 GB/s shared 8 ways: ~100 min, the seeds' "141 shards, ~40 s/shard, ETA ~95 min"
    assert eight == pytest.approx(753.3e9 / 125e6, rel=0.01)


async def test_a_client_that_hangs_up_mid_stream_is_no_server_error(sim, serve, caplog):
    """A canary round past its bound closes its stream before the first token:
    the engine ends that stream quietly (as uvicorn does), no handler error."""
    import asyncio
    import logging

    await serve(sim, LANE)
    await sim.advance(4 * 3600)
    host = sim.nodes["dgx1"].api_host
    caplog.set_level(logging.ERROR, logger="aiohttp.server")
    body = {"model": "RedHatAI/GLM-5.3-MXFP4", "max_tokens": 8, "stream": True,
            "messages": [{"role": "user", "content": "hello " * 4000}]}
    async with httpx.AsyncClient(base_url=f"http://{host}:8000", timeout=10) as client, \
            client.stream("POST", "/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200  # headers at once, the first token after prefill
    await sim.advance(60)  # prefill ends: the engine writes to a stream nobody reads
    await asyncio.sleep(0.2)
    assert [r.getMessage() for r in caplog.records if r.name == "aiohttp.server"] == []
