"""A simulated engine core that hangs while idle answers as the real one
does in each dialect (tests/fixtures/dialects/hung_core.py, from the wheels):
vLLM keeps ``/health`` 200, its ``/metrics`` keep the last step's values (0
running, 0 waiting: the stuck request is never counted) and a streamed chat
gets its headers, then nothing; SGLang's ``/health`` (a generation) gives no
answer and a streamed chat gets no headers."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest

from sparktui.adapters.engine_http import parse_metrics
from sparktui.core.config import Config
from sparktui.sim.cluster import Sim
from sparktui.sim.spec import spec_from_config
from sparktui.sim.testing import running_sim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.hung_core import SHAPES

LANES = {"vllm-0.33": "glm53-flash-eugr-2x", "vllm-0.11": "glm53-flash-eugr-2x",
         "sglang-0.5": "dsv41-flash-sglang-4x"}
HANG_AFTER_S = 120.0


async def boot(sim: Sim, serve, lane: str) -> None:  # type: ignore[no-untyped-def]
    await serve(sim, lane)
    for _ in range(2000):
        await sim.advance(30)
        try:
            if sim.lane_rank0(lane).phase == "ready":
                return
        except KeyError:
            pass
    raise AssertionError("the lane never served")


def queue(metrics: dict[str, float]) -> tuple[float, ...]:
    keys = [k for k in metrics if k.endswith(("num_requests_running", "num_requests_waiting",
                                              "num_running_reqs", "num_queue_reqs",
                                              "prompt_tokens_total", "generation_tokens_total"))]
    return tuple(metrics[k] for k in sorted(keys))


@pytest.mark.parametrize("dialect", sorted(LANES))
async def test_a_core_hung_idle_answers_as_its_dialect_does(fleet: Config, serve,  # type: ignore[no-untyped-def]
                                                            dialect: str) -> None:
    shape = SHAPES[dialect]
    lane = LANES[dialect]
    spec = spec_from_config(fleet)
    spec.dialect = dialect
    spec.engine_core_dies_after_s = HANG_AFTER_S
    async with running_sim(spec=spec, scenario="normal") as sim:
        await boot(sim, serve, lane)
        engine = sim.lane_rank0(lane)
        host, port = engine.node.api_host, engine.args.port
        for _ in range(20):
            if engine.core_dead:
                break
            await sim.advance(10)
        assert engine.core_dead
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=1.0) as client:
            before = parse_metrics((await client.get("/metrics")).text)
            model = (await client.get("/v1/models")).json()["data"][0]["id"]
            body = {"model": model, "max_tokens": 1, "stream": True,
                    "messages": [{"role": "user", "content": "Say OK."}]}
            headers: list[int] = []

            async def chat() -> None:
                async with client.stream("POST", "/v1/chat/completions", json=body,
                                         timeout=httpx.Timeout(1.0, read=None)) as r:
                    headers.append(r.status_code)
                    async for _ in r.aiter_bytes():
                        raise AssertionError("a hung core streams nothing")

            task = asyncio.create_task(chat())
            for _ in range(30):
                await sim.advance(1)
                await asyncio.sleep(0.01)
            assert not task.done()
            assert headers == ([200] if shape.headers else [])
            after = parse_metrics((await client.get("/metrics")).text)
            assert queue(after) == queue(before)  # no step: the last step's values
            running = [v for k, v in after.items()
                       if k.endswith(("num_requests_running", "num_requests_waiting",
                                      "num_running_reqs", "num_queue_reqs"))]
            assert running == [0.0, 0.0]
            if shape.health_status is None:
                with pytest.raises(httpx.ReadTimeout):
                    await client.get("/health")
            else:
                assert (await client.get("/health")).status_code == shape.health_status
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_sglang_answers_headers_with_its_first_chunk(fleet: Config, serve) -> None:  # type: ignore[no-untyped-def]
    """A healthy SGLang: the stream's headers and first chunk come together."""
    lane = LANES["sglang-0.5"]
    async with running_sim(fleet, scenario="normal") as sim:
        await boot(sim, serve, lane)
        engine = sim.lane_rank0(lane)
        async with httpx.AsyncClient(base_url=f"http://{engine.node.api_host}:"
                                     f"{engine.args.port}", timeout=5.0) as client:
            model = (await client.get("/v1/models")).json()["data"][0]["id"]
            body = {"model": model, "max_tokens": 4, "stream": True,
                    "messages": [{"role": "user", "content": "Say OK."}]}
            task = asyncio.create_task(client.send(
                client.build_request("POST", "/v1/chat/completions", json=body), stream=True))
            while not task.done():
                await sim.advance(0.5)
                await asyncio.sleep(0.01)
            resp = await task
            assert resp.status_code == 200
            assert engine.requests[-1].first_token_t > 0  # made before the headers went
            await resp.aclose()
