"""The serving canary, through the production completer and the engine HTTP
adapter, against a loopback server that plays the golden "hung idle core"
shape of each dialect (tests/fixtures/dialects/hung_core.py, from the
wheels' source), not the simulator: a vLLM core that hung idle (``/health``
200, ``/metrics`` frozen at 0 running / 0 waiting, the stream's headers then
nothing) is ``unresponsive`` within one canary interval of the hang; an
SGLang scheduler that hung idle gives no headers (no round evidence) and no
``/health`` answer, which the health rule calls ``unresponsive``. The
canary's bounds run on a manual clock; the HTTP is real."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from sparktui.adapters.engine_http import EngineClient
from sparktui.core.canary import HUNG_HEALTH_CHECKS, NO_ANSWER, CanaryVerdict
from sparktui.sim.clock import SimClock
from sparktui.watch.canary import ServingCanary, completer_for
from sparktui.watch.lane_endpoint import health_word

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.hung_core import MODEL, SHAPES, HungIdleCore

INTERVAL_S = 60.0
CHECK_S = 5.0
"""The lane watcher's endpoint checks (LaneWatcher.endpoint_every_s)."""


def app_for(shape: HungIdleCore) -> web.Application:
    async def health(request: web.Request) -> web.Response:
        if shape.health_status is None:
            await asyncio.sleep(shape.health_after_s or 3600.0)
            return web.Response(status=503)
        return web.Response(status=shape.health_status)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=shape.metrics, content_type="text/plain")

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        if shape.headers:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
        await asyncio.Event().wait()  # the core never steps
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@asynccontextmanager
async def serving(shape: HungIdleCore) -> AsyncIterator[int]:
    runner = web.AppRunner(app_for(shape), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("dialect", ["vllm-0.33", "vllm-0.11"])
async def test_a_vllm_completion_is_accepted_then_nothing(dialect: str) -> None:
    async with serving(SHAPES[dialect]) as port, \
            EngineClient("127.0.0.1", port, timeout=3.0) as client:
        done = await client.chat(MODEL, "Say OK.", max_tokens=1, timeout=0.5)
    assert done.error == "no complete answer in 0.5 s" and done.accepted


@pytest.mark.parametrize("dialect", ["vllm-0.33", "vllm-0.11"])
async def test_a_vllm_core_hung_idle_is_unresponsive_within_one_interval(dialect: str) -> None:
    clock = SimClock()
    verdicts: list[tuple[float, CanaryVerdict | None]] = []
    async with serving(SHAPES[dialect]) as port:
        canary = ServingCanary("lane", clock=clock, interval_s=INTERVAL_S,
                               complete=completer_for(lambda node: "127.0.0.1"),
                               on_verdict=lambda v: verdicts.append((clock.monotonic(), v)))

        async def checks() -> None:
            async with EngineClient("127.0.0.1", port, timeout=3.0) as client:
                while True:
                    health = health_word(await client.health())
                    canary.observe(health, await client.metrics(), ["dgx1"], ("dgx1", port))
                    await clock.sleep(CHECK_S)

        tasks = [asyncio.create_task(checks()),
                 asyncio.create_task(canary.run(lambda: ("dgx1", port)))]
        try:
            while clock.monotonic() < 2 * INTERVAL_S and not (
                    verdicts and verdicts[-1][1] is not None and verdicts[-1][1].unresponsive):
                await clock.advance(0.5, step=0.5, drain=True)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    called = [(t, v) for t, v in verdicts if v is not None and v.unresponsive]
    assert called, verdicts
    at, v = called[0]
    assert at <= INTERVAL_S, verdicts  # hung from the start
    assert [x.state for _, x in verdicts if x is not None] == ["slow", "unresponsive"]
    assert v.evidence[0] == ("/health answers 200 but a 1-token completion failed: "
                             "no answer in 10 s")
    assert v.evidence[1].startswith("the API server took it (headers 200"), v.evidence
    assert "no token processed and no engine step" in v.evidence[1]
    assert "(0 running, 0 waiting, /metrics unchanged)" in v.evidence[1]


async def test_an_sglang_scheduler_hung_idle_is_unresponsive_by_its_health() -> None:
    shape = SHAPES["sglang-0.5"]
    clock = SimClock()
    async with serving(shape) as port:
        canary = ServingCanary("lane", clock=clock, interval_s=INTERVAL_S, complete=None)
        async with EngineClient("127.0.0.1", port, timeout=0.3) as client:
            # a completion sees no headers (SGLang waits for the first chunk)
            done = await client.chat(MODEL, "Say OK.", max_tokens=1, timeout=0.5)
            assert done.error == "no complete answer in 0.5 s" and not done.accepted
            # the endpoint checks: /health gives no answer within the lane's bound
            for _ in range(HUNG_HEALTH_CHECKS):
                health = health_word(await client.health())
                assert health == NO_ANSWER
                canary.observe(health, await client.metrics(), ["dgx1"], ("dgx1", port))
    assert canary.verdict is not None and canary.verdict.unresponsive
    assert canary.verdict.evidence == (f"port {port} gives no answer to /health on "
                                       f"{HUNG_HEALTH_CHECKS} checks in a row",)


def prefilling_app(reads: tuple[str, ...]) -> web.Application:
    """SGLang behind a long prompt (tests/fixtures/dialects/long_request.py):
    ``/health`` gives no answer, each ``/metrics`` read is the next golden one."""
    served = iter(reads)

    async def health(request: web.Request) -> web.Response:
        await asyncio.sleep(3600.0)
        return web.Response(status=503)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=next(served), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    return app


@pytest.mark.parametrize("moving", [True, False], ids=["prefilling", "hung"])
async def test_an_sglang_health_behind_a_long_prompt_is_busy_not_unresponsive(
        moving: bool) -> None:
    """No answer to /health while the scheduler's step counter moves chunk
    by chunk is busy, for three minutes of checks; the same with the counter
    frozen (a scheduler hung mid-request) is unresponsive on the third."""
    from fixtures.dialects.long_request import PREFILL
    from fixtures.dialects.long_request import SHAPES as LONG

    reads = PREFILL if moving else (LONG["sglang-0.5"].hung,) * len(PREFILL)
    runner = web.AppRunner(prefilling_app(reads), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    clock = SimClock()
    states: list[str | None] = []
    canary = ServingCanary("lane", clock=clock, interval_s=INTERVAL_S, complete=None)
    try:
        async with EngineClient("127.0.0.1", port, timeout=0.2) as client:
            for _ in range(len(reads)):
                health = health_word(await client.health())
                assert health == NO_ANSWER
                canary.observe(health, await client.metrics(), ["dgx1"], ("dgx1", port))
                states.append(canary.verdict.state if canary.verdict else None)
                await clock.advance(CHECK_S, step=CHECK_S)
    finally:
        await runner.cleanup()
    if moving:
        assert "unresponsive" not in states and states[-1] == "busy", states
        assert canary.verdict is not None and "busy, not dead" in canary.verdict.evidence[0]
    else:
        assert states[:HUNG_HEALTH_CHECKS] == [None] * (HUNG_HEALTH_CHECKS - 1) + \
            ["unresponsive"], states
