"""The simulated SGLang's ``/health`` is a generation, as SGLang 0.5.23's
(``srt/entrypoints/http_server.py:721``, ``:781``): behind a long prompt,
which its scheduler prefills chunk after chunk with nothing beside it and no
output until the last (``managers/scheduler.py:3993``,
``managers/schedule_policy.py:890``, ``batch_result_processor.py:432``), it
gives no answer while ``realtime_tokens_total`` moves: 200 once the prompt
is in, 503 when that takes past 20 s. vLLM's answers at once."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from sparktui.adapters.engine_http import parse_metrics
from sparktui.core.config import Config
from sparktui.sim.testing import running_sim

from .test_engine_hang import LANES, boot


@pytest.mark.parametrize(("dialect", "prefill_s", "status"),
                         [("sglang-0.5", 10.0, 200), ("sglang-0.5", 40.0, 503),
                          ("vllm-0.33", 40.0, 200)])
async def test_health_behind_a_long_prompt(fleet: Config, serve, dialect: str,  # type: ignore[no-untyped-def]
                                           prefill_s: float, status: int) -> None:
    lane = LANES[dialect]
    async with running_sim(fleet, scenario="normal") as sim:
        await boot(sim, serve, lane)
        engine = sim.lane_rank0(lane)
        async with httpx.AsyncClient(base_url=f"http://{engine.node.api_host}:"
                                     f"{engine.args.port}", timeout=5.0) as client:
            req = sim.run_prompt(lane, int(engine.prefill_tps() * prefill_s), max_tokens=4)
            await sim.advance(1)
            assert engine.prefilling
            asked = sim.clock.monotonic()
            health = asyncio.create_task(client.get("/health"))
            steps: list[float] = []
            while not health.done():
                await sim.advance(1)
                for _ in range(5):
                    await asyncio.sleep(0.01)
                if dialect.startswith("sglang"):
                    m = parse_metrics((await client.get("/metrics")).text)
                    steps.append(m["sglang:realtime_tokens_total"])
                assert sim.clock.monotonic() - asked < 60, "no answer"
            answered = sim.clock.monotonic() - asked
            assert (await health).status_code == status
        if dialect.startswith("vllm"):
            assert answered <= 1.0 and req.first_token_t == 0  # at once, mid-prefill
        elif status == 200:
            assert req.first_token_t > 0 and answered <= prefill_s + 1.0
            assert steps[-1] > steps[0]  # the chunks moved its step counter meanwhile
        else:
            assert req.first_token_t == 0 and 20.0 <= answered <= 21.0
            assert steps[-1] > steps[0]
