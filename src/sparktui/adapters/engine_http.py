"""HTTP to a lane's engine (vLLM or SGLang): port, ``/health``,
``/v1/models``, ``/metrics`` and one short streaming completion for the
first-token time (as sparkrun's readiness does). Every call is bounded by a
timeout; a refused connection is an answer ("not up yet"), not an error.

The endpoint is ``http://<rank-0 api_host>:<port>`` (docs/CONTRACTS.md).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sparktui.adapters.ping import tcp_alive
from sparktui.adapters.tls import client_tls

DEFAULT_TIMEOUT_S = 5.0
REASONING_KEYS = ("reasoning", "reasoning_content")
"""Where a reasoning parser's output streams: vLLM 0.33 ``delta.reasoning``
(``entrypoints/generate/base/protocol.py:359``), vLLM 0.11 and SGLang 0.5.23
``delta.reasoning_content`` (``entrypoints/openai/protocol.py:1894``,
``srt/entrypoints/openai/protocol.py:1357``); docs/DIALECTS.md."""
NO_THINKING = {"thinking": False, "enable_thinking": False}
"""``chat_template_kwargs`` asking the template not to think: the two keys
SGLang 0.5.23 itself sets for ``reasoning_effort`` ("thinking" for DeepSeek
V3 and Kimi K2, "enable_thinking" for Qwen3 and GLM-4.5,
``srt/entrypoints/openai/protocol.py:1146``); vLLM 0.33 passes on only the
ones the template declares (``renderers/hf.py:803``), so a template without
such a switch is asked nothing."""


@dataclass(frozen=True)
class HealthAnswer:
    status: int | None
    """HTTP status; None when the connection was refused or timed out."""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200


async def port_open(host: str, port: int, timeout: float = 2.0) -> bool:
    """Does something accept TCP connections on host:port?"""
    return await tcp_alive(host, port, timeout)


class Samples(dict[str, float]):
    """The samples of one ``/metrics`` answer (:func:`parse_metrics`) and the
    engine host's clock when it answered: the answer's ``Date`` header (epoch
    seconds, whole seconds), which uvicorn writes from ``time.time()`` once a
    second by default (uvicorn 0.55 ``server.py:252``, ``config.py:226``
    ``date_header=True``; neither vLLM 0.33 nor SGLang 0.5.23 turns it off).
    The engine's counters move on that clock, not on the watcher's."""

    def __init__(self, values: Iterable[tuple[str, float]] = (),
                 date: float | None = None) -> None:
        super().__init__(values)
        self.date = date


def http_date(value: str | None) -> float | None:
    """An HTTP ``Date`` header (RFC 9110 IMF-fixdate) -> epoch seconds; None
    when absent or unreadable."""
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


BY_LABEL = {"sglang:realtime_tokens_total": "mode"}
"""Samples also kept per value of one label, as ``name{label="value"}``:
SGLang's per-step token counter, whose ``mode`` (``prefill_compute``,
``prefill_cache``, ``decode``; 0.5.23 ``observability/metrics_collector.py:1033``)
tells decoded tokens from prompt ones (core/canary.decode_tokens)."""


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {sample name: value summed over label sets}.

    Labels (``model_name``, ``engine``) are summed away: one lane serves one
    model; the samples of :data:`BY_LABEL` are also kept per value of its
    label. Unparseable text gives an empty dict.
    """
    out: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[sample.name] = out.get(sample.name, 0.0) + float(sample.value)
                label = BY_LABEL.get(sample.name)
                if label is not None and label in sample.labels:
                    key = f'{sample.name}{{{label}="{sample.labels[label]}"}}'
                    out[key] = out.get(key, 0.0) + float(sample.value)
    except (ValueError, TypeError, IndexError):
        return {}
    return out


class EngineClient:
    """One engine endpoint. Use as an async context manager."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.base_url = f"http://{host}:{port}"
        self.timeout = timeout
        self._client = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, transport=transport, trust_env=False,
            verify=client_tls())

    async def __aenter__(self) -> EngineClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def port_open(self) -> bool:
        return await port_open(self.host, self.port, self.timeout)

    async def health(self) -> HealthAnswer:
        try:
            r = await self._client.get("/health")
        except httpx.TransportError as exc:
            return HealthAnswer(None, type(exc).__name__)
        return HealthAnswer(r.status_code)

    async def models(self, tag: str | None = None) -> list[str]:
        """Model ids served; empty when not answering or malformed. ``tag`` goes
        in the query string (``?sparktui=TAG``): uvicorn's access log writes it
        into the answering engine's log, which tells whose server answered."""
        try:
            r = await self._client.get("/v1/models", params={"sparktui": tag} if tag else None)
        except httpx.TransportError:
            return []
        if r.status_code != 200:
            return []
        try:
            data = r.json().get("data", [])
            return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        except (ValueError, AttributeError, TypeError):
            return []

    async def metrics(self) -> Samples:
        """The engine's ``/metrics`` samples with the answer's ``Date``; empty
        when it does not answer."""
        try:
            r = await self._client.get("/metrics")
        except httpx.TransportError:
            return Samples()
        if r.status_code != 200:
            return Samples()
        return Samples(parse_metrics(r.text).items(), http_date(r.headers.get("date")))

    async def first_token(self, model: str, prompt: str = "Say OK.") -> float | None:
        """Seconds from sending one streaming chat request (max_tokens 1) to
        its first content or reasoning chunk; None when none came. The
        template is asked not to think, and a reasoning token counts too: on
        a ``--reasoning-parser`` lane the one token may be reasoning."""
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 1,
            "stream": True,
            "chat_template_kwargs": NO_THINKING,
        }
        started = time.monotonic()
        try:
            async with self._client.stream("POST", "/v1/chat/completions", json=body) as r:
                if r.status_code != 200:
                    return None
                if "text/event-stream" not in r.headers.get("content-type", ""):
                    # a server that ignores "stream" answers with one JSON body
                    await r.aread()
                    return time.monotonic() - started if _json_has_token(r.content) else None
                async for line in r.aiter_lines():
                    if _has_token(line):
                        return time.monotonic() - started
        except httpx.TransportError:
            return None
        return None

    async def chat(self, model: str, prompt: str, *, max_tokens: int,
                   timeout: float, clock: Callable[[], float] = time.monotonic,
                   fixed_length: bool = False,
                   on_accepted: Callable[[], None] | None = None) -> ChatAnswer:
        """One chat completion at temperature 0, streamed, bounded by ``timeout`` seconds
        in all. ``clock`` times it (the simulator's clock in tests); ``fixed_length``
        asks vLLM for exactly ``max_tokens`` (``min_tokens``/``ignore_eos``, a bench).

        ``on_accepted`` is called, and the answer's ``accepted`` set, once the
        response's status line and headers came with 200: the API server took
        the request. vLLM sends them before the request reaches its engine core
        (the route returns a StreamingResponse around a generator that adds the
        request when first iterated: 0.33 ``openai/chat_completion/api_router.py:82``,
        ``v1/engine/async_llm.py:773``; starlette writes ``http.response.start``
        before the first chunk, ``responses.py:254``, and uvicorn puts it on the
        wire at once, ``protocols/http/httptools_impl.py:522``). SGLang 0.5.23
        sends them only with the first chunk (``serving_chat.py:2422``)."""
        body: dict[str, object] = {
            "model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True},
            "chat_template_kwargs": NO_THINKING,
        }
        if fixed_length:
            body.update(min_tokens=max_tokens, ignore_eos=True)
        content: list[str] = []
        reasoning: list[str] = []
        usage: dict[str, object] = {}
        started = clock()
        first = last = None
        accepted = False
        try:
            async with asyncio.timeout(timeout), self._client.stream(
                    "POST", "/v1/chat/completions", json=body, timeout=timeout) as r:
                if r.status_code != 200:
                    text = error_message(await r.aread())
                    return ChatAnswer(error=f"HTTP {r.status_code}: {text}")
                accepted = True
                if on_accepted is not None:
                    on_accepted()
                async for line in r.aiter_lines():
                    if not line.startswith("data:") or line[5:].strip() in ("", "[DONE]"):
                        continue
                    try:
                        chunk = json.loads(line[5:])
                    except ValueError:
                        continue
                    if not isinstance(chunk, dict):
                        continue
                    if "error" in chunk or chunk.get("object") == "error":
                        return ChatAnswer(error=error_message(line[5:]), accepted=True)
                    if isinstance(chunk.get("usage"), dict):
                        usage = chunk["usage"]
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") if isinstance(choice, dict) else None
                        if not isinstance(delta, dict):
                            continue
                        text = delta.get("content") or ""
                        think = _reasoning(delta)
                        if text or think:
                            now = clock()
                            first = now if first is None else first
                            last = now
                            content.append(str(text))
                            reasoning.append(str(think))
        except TimeoutError:
            return ChatAnswer("".join(content), error=f"no complete answer in {timeout:g} s",
                              accepted=accepted)
        except httpx.TransportError as exc:
            return ChatAnswer(error=f"{type(exc).__name__}: {exc}"[:300], accepted=accepted)

        def count(key: str) -> int | None:
            value = usage.get(key)
            return value if isinstance(value, int) else None

        return ChatAnswer("".join(content), "".join(reasoning), count("prompt_tokens"),
                          count("completion_tokens"),
                          None if first is None else first - started,
                          None if first is None or last is None else last - first,
                          accepted=True)


@dataclass(frozen=True)
class ChatAnswer:
    """One streamed chat completion, with the times the smoke bench needs."""

    content: str = ""
    reasoning: str = ""
    """``reasoning`` / ``reasoning_content`` deltas (a reasoning parser's output), kept apart."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    """From the final ``usage`` chunk; None when the server sent none."""
    ttft_s: float | None = None
    """Request sent -> first content (or reasoning) delta."""
    decode_s: float | None = None
    """First delta -> last delta."""
    error: str = ""
    """Why there is no answer: HTTP status and body, a transport error, a timeout."""
    accepted: bool = False
    """The response began (status 200, headers) within the bound: the API server took it."""


def _has_token(line: str) -> bool:
    """An SSE ``data:`` line carrying a delta (chat) or text (completion)."""
    if not line.startswith("data:"):
        return False
    payload = line[5:].strip()
    if not payload or payload == "[DONE]":
        return False
    return _json_has_token(payload)


def _json_has_token(payload: str | bytes) -> bool:
    """A chat/completion object (chunk or whole) whose choices carry text."""
    try:
        choices = json.loads(payload).get("choices") or []
    except (ValueError, AttributeError):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        for part in (choice.get("delta"), choice.get("message")):
            if isinstance(part, dict) and (part.get("content") or _reasoning(part)):
                return True
        if choice.get("text"):
            return True
    return False


def _reasoning(part: dict[str, object]) -> str:
    """The reasoning text of a delta or message in either engine's field."""
    for key in REASONING_KEYS:
        value = part.get(key)
        if value:
            return str(value)
    return ""


def error_message(body: str | bytes, limit: int = 300) -> str:
    """The message of an engine's error body: vLLM's ``{"error": {"message":
    ...}}`` (``entrypoints/serve/engine/protocol.py:86``), SGLang's flat
    ``{"object": "error", "message": ...}`` (``srt/entrypoints/openai/protocol.py:106``),
    FastAPI's ``{"detail": ...}``; else the body's text, cut to ``limit``."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:limit]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            data = err
        elif isinstance(err, str) and err:
            return err[:limit]
        for key in ("message", "detail"):
            value = data.get(key)
            if isinstance(value, str) and value:
                kind = data.get("type")
                return (f"{kind}: {value}" if isinstance(kind, str) and kind else value)[:limit]
    return text.strip()[:limit]
