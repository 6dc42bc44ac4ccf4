"""The engine's HTTP API on the node's api_host: /health, /v1/models, /metrics
(Prometheus text, vLLM or SGLang metric names) and a tiny chat completion
that runs through the engine model (so a long prompt can kill it)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from email.utils import formatdate
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from . import engine_chat
from .engine_vllm import models_json

if TYPE_CHECKING:
    from .engine import Engine, Request

SGLANG_TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGLANG_E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
                      600, 1200, 1800, 2400]
"""SGLang 0.5.23's default buckets (``observability/metrics_collector.py:1965``, ``:1987``)."""
SGLANG_HEALTH_TIMEOUT_S = 20.0
"""SGLang's ``/health`` sends a 1-token generation and answers 503 when the
scheduler gave nothing back in this long (0.5.23
``srt/entrypoints/http_server.py:218`` ``SGLANG_HEALTH_CHECK_TIMEOUT``, the
handler ``:721``; generation on by default, ``srt/environ.py:344``)."""

_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
            7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]


class _EngineCollector:
    def __init__(self, engine: Engine) -> None:
        self.e = engine

    def collect(self) -> Iterator[Metric]:
        e, st = self.e, self.e.stats
        if e.args.log_stats_off:
            return  # no stat logger, so no Prometheus one: /metrics without a vllm: series
        p = "vllm" if e.args.kind == "vllm" else "sglang"
        labels = ["model_name", "engine"] if p == "vllm" else ["model_name"]
        values = [e.args.name, "0"] if p == "vllm" else [e.args.name]

        def gauge(name: str, doc: str, value: float) -> Metric:
            g = GaugeMetricFamily(f"{p}:{name}", doc, labels=labels)
            g.add_metric(values, value)
            return g

        def counter(name: str, doc: str, value: float) -> Metric:
            c = CounterMetricFamily(f"{p}:{name}", doc, labels=labels)
            c.add_metric(values, value)
            return c

        def histogram(name: str, doc: str, samples: list[float],
                      bounds: list[float] = _BUCKETS) -> Metric:
            h = HistogramMetricFamily(f"{p}:{name}", doc, labels=labels)
            add_histogram(h, values, samples, bounds)
            return h

        def by_streaming(name: str, doc: str, samples: list[float],
                         bounds: list[float]) -> Metric:
            """SGLang's request histograms carry ``is_streaming``
            (``observability/metrics_collector.py:2105``)."""
            h = HistogramMetricFamily(f"{p}:{name}", doc, labels=[*labels, "is_streaming"])
            for flag in (False, True):
                add_histogram(h, [*values, "true" if flag else "false"],
                              [x for x, streamed in zip(samples, st.streamed, strict=True)
                               if streamed is flag], bounds)
            return h

        if p == "vllm":
            yield gauge("num_requests_running", "Number of requests in model execution batches.",
                        st.running)
            yield gauge("num_requests_waiting", "Number of requests waiting to be processed.",
                        st.waiting)
            yield gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                        e.kv_in_use / e.kv_tokens if e.kv_tokens else 0.0)
            yield counter("prompt_tokens", "Number of prefill tokens processed.", st.prompt_tokens)
            yield counter("generation_tokens", "Number of generation tokens processed.",
                          st.generation_tokens)
            yield counter("num_preemptions", "Cumulative number of preemption from the engine.",
                          0)
            ok = CounterMetricFamily("vllm:request_success", "Count of successfully processed "
                                     "requests.", labels=[*labels, "finished_reason"])
            ok.add_metric([*values, "length"], st.success)
            yield ok
            yield histogram("time_to_first_token_seconds",
                            "Histogram of time to first token in seconds.", st.ttft)
            yield histogram("e2e_request_latency_seconds",
                            "Histogram of e2e request latency in seconds.", st.e2e)
        else:
            yield gauge("num_running_reqs", "The number of running requests.", st.running)
            yield gauge("num_queue_reqs", "The number of requests in the waiting queue.",
                        st.waiting)
            yield gauge("gen_throughput", "The generation throughput (token/s).",
                        st.gen_throughput)
            yield gauge("token_usage", "The token usage.",
                        e.kv_in_use / e.kv_tokens if e.kv_tokens else 0.0)
            # the scheduler's count at every prefill batch and decode step, a
            # series per mode from its first token (0.5.23
            # scheduler_components/metrics_reporter.py:810, :912; metrics_collector.py:1572)
            steps = CounterMetricFamily(
                "sglang:realtime_tokens", "Total number of tokens processed (updated on each "
                "log interval). mode: prefill_compute, prefill_cache, decode.",
                labels=[*labels, "mode"])
            for mode, n in (("prefill_compute", st.prompt_tokens),
                            ("decode", st.generation_tokens)):
                if n:
                    steps.add_metric([*values, mode], n)
            yield steps
            # the tokenizer's, once a request finishes (metrics_collector.py:2109,
            # tokenizer_manager.py:3287), a series per is_streaming seen
            for name, doc, i in (("prompt_tokens", "Number of prefill tokens processed.", 0),
                                 ("generation_tokens", "Number of generation tokens processed.",
                                  1)):
                done = CounterMetricFamily(f"sglang:{name}", doc,
                                           labels=[*labels, "is_streaming"])
                for flag in sorted(set(st.streamed)):
                    done.add_metric([*values, "true" if flag else "false"],
                                    sum(t[i] for t, streamed in
                                        zip(st.finished, st.streamed, strict=True)
                                        if streamed is flag))
                yield done
            # the tokenizer's timers of each finished request, as vLLM's are
            # (0.5.23 observability/metrics_collector.py:2041, :2067, observed :2139)
            yield by_streaming("time_to_first_token_seconds",
                               "Histogram of time to first token in seconds.", st.ttft,
                               SGLANG_TTFT_BUCKETS)
            yield by_streaming("e2e_request_latency_seconds",
                               "Histogram of End-to-end request latency in seconds", st.e2e,
                               SGLANG_E2E_BUCKETS)


def add_histogram(h: HistogramMetricFamily, values: list[str], samples: list[float],
                  bounds: list[float]) -> None:
    buckets = [(str(b), float(sum(1 for s in samples if s <= b))) for b in bounds]
    buckets.append(("+Inf", float(len(samples))))
    h.add_metric(values, buckets, sum(samples))


API_SERVER_RSS_BYTES = 1_450_000_000
"""The API server process's own resident memory (the engine core and workers
hold the weights, in processes of their own)."""
API_SERVER_VMS_BYTES = 21_800_000_000
"""Its virtual size (torch and CUDA mapped in)."""
CPU_S_PER_S, CPU_S_PER_TOKEN = 0.02, 2e-5
"""The API server's CPU: its loops while idle, detokenising and streaming per token."""
OPEN_FDS, MAX_FDS = 57, 1_048_576
"""Its open files (ZMQ sockets, the model files' handles gone) and docker's nofile limit."""


class _ProcessCollector:
    """What prometheus_client's ProcessCollector adds to a vLLM ``/metrics``:
    the API server's own process (its names, help and types; tests compare
    them with prometheus_client's). vLLM with one API server serves the
    default registry, which holds it (``vllm/v1/metrics/prometheus.py:53`` at
    0.33); SGLang serves a MultiProcessCollector registry, which has none
    (``sglang/srt/utils/common.py:2848`` at 0.5.23). The start time is the
    container's (the server is its first process), on the simulated clock."""

    def __init__(self, engine: Engine) -> None:
        self.e = engine

    def collect(self) -> Iterator[Metric]:
        e, st = self.e, self.e.stats
        now = e.sim.wall()
        started = e.container.started_t if e.container.started_t is not None else now
        cpu = max(0.0, now - started) * CPU_S_PER_S \
            + (st.prompt_tokens + st.generation_tokens) * CPU_S_PER_TOKEN
        yield GaugeMetricFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                                value=float(API_SERVER_VMS_BYTES))
        yield GaugeMetricFamily("process_resident_memory_bytes",
                                "Resident memory size in bytes.",
                                value=float(API_SERVER_RSS_BYTES))
        yield GaugeMetricFamily("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds.",
                                value=float(started))
        yield CounterMetricFamily("process_cpu_seconds_total",
                                  "Total user and system CPU time spent in seconds.", value=cpu)
        yield GaugeMetricFamily("process_open_fds", "Number of open file descriptors.",
                                value=float(OPEN_FDS + sum(not r.done for r in e.requests)))
        yield GaugeMetricFamily("process_max_fds", "Maximum number of open file descriptors.",
                                value=float(MAX_FDS))


def build_app(engine: Engine, wait_for: Callable[[Callable[[], bool]], Awaitable[None]]) -> \
        web.Application:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_EngineCollector(engine))
    if engine.args.kind == "vllm":
        registry.register(_ProcessCollector(engine))
    created = int(time.time())

    @web.middleware
    async def access_log(request: web.Request, handler: Callable[[web.Request],
                                                                 Awaitable[web.StreamResponse]]) \
            -> web.StreamResponse:
        await wait_for(lambda: engine.node.responsive)  # a thrashing node answers nothing
        resp = await handler(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        who = f"{peer[0]}:{peer[1]}" if peer else "127.0.0.1:0"
        reason = resp.reason or ""
        # uvicorn's access format, under SGLang's date there (utils/common.py:3516-3518)
        engine.log(engine.style.d.uvicorn(f'{who} - "{request.method} {request.path_qs} '
                                          f'HTTP/1.1" {resp.status} {reason}', when=engine.t()),
                   "stderr")
        return resp

    def error(status: int, err: str, message: str) -> web.Response:
        return web.json_response(error_body(engine.args.kind, status, err, message),
                                 status=status)

    async def health(request: web.Request) -> web.Response:
        if engine.args.kind == "sglang" and engine.core_dead and engine.phase == "ready":
            # its /health is a generation that a hung scheduler never answers: 503
            # after 20 s of the host's time.time(), which for a simulated host is
            # both clocks (a client's shorter bound on either sees no answer)
            until = engine.sim.sched.t + SGLANG_HEALTH_TIMEOUT_S
            await asyncio.gather(wait_for(lambda: engine.sim.sched.t >= until),
                                 asyncio.sleep(SGLANG_HEALTH_TIMEOUT_S))
            return web.Response(status=503)
        if engine.args.kind == "sglang" and engine.prefilling and engine.phase == "ready":
            # a generation that waits for any output of the scheduler, which
            # prefills a long prompt chunk after chunk with nothing beside it
            # and streams nothing until its last (0.5.23 http_server.py:781,
            # managers/scheduler.py:3993, schedule_policy.py:890,
            # batch_result_processor.py:432): 200 once it is done, 503 after 20 s
            until = engine.sim.sched.t + SGLANG_HEALTH_TIMEOUT_S
            await wait_for(lambda: not engine.prefilling or engine.sim.sched.t >= until)
            return web.Response(status=503 if engine.prefilling else engine.health_status)
        return web.Response(status=engine.health_status)

    async def models(request: web.Request) -> web.Response:
        return web.Response(text=models_json(engine, created), content_type="application/json")

    async def metrics(request: web.Request) -> web.Response:
        # uvicorn's Date (the engine host's clock, whole seconds): the simulated one
        return web.Response(body=generate_latest(registry),
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8",
                                     "Date": formatdate(engine.sim.wall(), usegmt=True)})

    async def chat(request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.text())
        except ValueError:
            return error(400, "BadRequestError", "Invalid JSON body")
        text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        prompt = int(body.get("prompt_tokens_hint") or max(1, len(text) // 4))
        max_tokens = int(body.get("max_tokens") or 16)
        if prompt + max_tokens > (engine.args.max_model_len or 32768):
            return error(400, "BadRequestError",
                          f"This model's maximum context length is {engine.args.max_model_len} "
                          f"tokens. However, your request has {prompt + max_tokens} input tokens.")
        answer = engine_chat.reply(text, model_repo=engine.model.repo if engine.model else "",
                                   garbles=engine.garbles, seed=engine.sim.spec.seed)
        if answer is None:  # filler, one token a word
            n_tokens, answer = max_tokens, "ok" + " ok" * (max_tokens - 1)
        else:
            answer = answer[:max_tokens * 4]
            n_tokens = engine_chat.tokens(answer)
        finish = "length" if n_tokens >= max_tokens else "stop"
        req = engine.submit(prompt, n_tokens, streaming=bool(body.get("stream")))
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            kwargs = body.get("chat_template_kwargs") or {}
            thinks = "reasoning-parser" in engine.args.extra and not (
                isinstance(kwargs, dict) and (kwargs.get("enable_thinking") is False
                                              or kwargs.get("thinking") is False))
            return await _stream(request, req, answer, finish, usage, thinks)
        await wait_for(lambda: req.done)
        if req.error:
            return error(500, "InternalServerError", req.error)
        return web.json_response({
            "id": f"chatcmpl-{engine.container.id[:24]}", "object": "chat.completion",
            "created": int(engine.sim.wall()), "model": engine.args.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": req.prompt_tokens,
                      "completion_tokens": req.completion_tokens,
                      "total_tokens": req.prompt_tokens + req.completion_tokens}})

    async def _stream(request: web.Request, req: Request, answer: str, finish: str,
                      usage: bool, thinks: bool = False) -> web.StreamResponse:
        """Server-sent events: headers at once (vLLM: before the request reaches
        the core; SGLang: with the first chunk, ``serving_chat.py:2422``), the
        first token when prefill ends, the rest at the end, then the usage chunk
        when asked (an engine death ends the stream with an error event). A
        client that hung up meanwhile (a canary round past its bound) ends it
        quietly, as uvicorn does."""
        if engine.args.kind == "sglang":
            await wait_for(lambda: req.first_token_t > 0 or req.done)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            return await _events(resp, req, answer, finish, usage, thinks)
        except ConnectionResetError:
            return resp

    async def _events(resp: web.StreamResponse, req: Request, answer: str, finish: str,
                      usage: bool, thinks: bool) -> web.StreamResponse:
        await wait_for(lambda: req.first_token_t > 0 or req.done)
        if req.error:
            await resp.write(("data: " + json.dumps(error_body(
                engine.args.kind, 500, "InternalServerError", req.error)) + "\n\n").encode())
            await resp.write_eof()
            return resp
        cid = f"chatcmpl-{engine.container.id[:24]}"

        def chunk(content: str, finish: str | None, key: str = "content") -> bytes:
            return ("data: " + json.dumps({
                "id": cid, "object": "chat.completion.chunk", "created": int(engine.sim.wall()),
                "model": engine.args.name, "choices": [{"index": 0, "delta": {key: content},
                                                        "finish_reason": finish}]},
                ensure_ascii=False) + "\n\n").encode()

        # a --reasoning-parser lane whose template may think streams its first
        # tokens as reasoning, in the dialect's field (delta.reasoning in vLLM 0.33)
        key = engine.style.d.reasoning_key if thinks else "content"
        await resp.write(chunk(answer[:4], None, key))
        await wait_for(lambda: req.done)
        if not req.error:
            await resp.write(chunk(answer[4:], finish))
            if usage:
                await resp.write(("data: " + json.dumps({
                    "id": cid, "object": "chat.completion.chunk", "choices": [],
                    "model": engine.args.name,
                    "usage": {"prompt_tokens": req.prompt_tokens,
                              "completion_tokens": req.completion_tokens,
                              "total_tokens": req.prompt_tokens + req.completion_tokens}})
                    + "\n\n").encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application(middlewares=[access_log])
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    if engine.args.kind == "vllm" or "enable-metrics" in engine.args.extra:
        app.router.add_get("/metrics", metrics)  # SGLang: only with --enable-metrics
    app.router.add_post("/v1/chat/completions", chat)
    if engine.args.kind == "sglang":
        app.router.add_get("/health_generate", health)
    return app


def error_body(engine: str, status: int, err: str, message: str) -> dict[str, object]:
    """vLLM's ``{"error": {...}}`` (0.33 entrypoints/serve/engine/protocol.py:86,
    0.11 entrypoints/openai/protocol.py:108), SGLang's flat body
    (srt/entrypoints/openai/protocol.py:106)."""
    info: dict[str, object] = {"message": message, "type": err, "param": None, "code": status}
    return {"error": info} if engine == "vllm" else {"object": "error", **info}
