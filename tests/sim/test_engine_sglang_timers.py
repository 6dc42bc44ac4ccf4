"""The simulated SGLang exports its request timers as SGLang 0.5.23 does
(``sglang:time_to_first_token_seconds`` and ``sglang:e2e_request_latency_seconds``
with ``is_streaming``, observability/metrics_collector.py:2041, :2067), so a
simulated SGLang gate is timed on the engine's timers (core/qualify.engine_timing)."""

from __future__ import annotations

import asyncio

import httpx

from sparktui.adapters.engine_http import parse_metrics
from sparktui.core.config import Config
from sparktui.core.qualify import engine_timing, exports_timers
from sparktui.sim.testing import running_sim

from .test_engine_hang import LANES, boot


async def test_sglang_times_each_request_on_its_own_timers(fleet: Config, serve) -> None:  # type: ignore[no-untyped-def]
    lane = LANES["sglang-0.5"]
    async with running_sim(fleet, scenario="normal") as sim:
        await boot(sim, serve, lane)
        engine = sim.lane_rank0(lane)
        async with httpx.AsyncClient(base_url=f"http://{engine.node.api_host}:"
                                     f"{engine.args.port}", timeout=5.0) as client:
            before_text = (await client.get("/metrics")).text
            before = parse_metrics(before_text)
            assert exports_timers(before)
            model = (await client.get("/v1/models")).json()["data"][0]["id"]
            task = asyncio.create_task(client.post("/v1/chat/completions", json={
                "model": model, "max_tokens": 40, "stream": True,
                "messages": [{"role": "user", "content": "hello " * 200}]}))
            while not task.done():
                await sim.advance(0.5)
                await asyncio.sleep(0.01)
            assert (await task).status_code == 200
            text = (await client.get("/metrics")).text
    after = parse_metrics(text)
    assert 'sglang:e2e_request_latency_seconds_bucket{is_streaming="true",' in text
    assert after["sglang:e2e_request_latency_seconds_count"] == \
        before["sglang:e2e_request_latency_seconds_count"] + 1
    timing = engine_timing(before, after)
    assert timing is not None
    req = engine.requests[-1]
    assert timing.ttft_s == req.first_token_t - req.started_t
    assert timing.decode_s > 0
