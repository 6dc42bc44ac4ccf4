"""HTTP to a lane's engine (vLLM or SGLang): port, ``/health``,
``/v1/models``, ``/metrics`` and one short streaming completion for the
first-token time (as sparkrun's readiness does). Every call is bounded by a
timeout; a refused connection is an answer ("not up yet"), not an error.

The endpoint is ``http://<rank-0 api_host>:<port>`` (docs/CONTRACTS.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sparktui.adapters.ping import tcp_alive

DEFAULT_TIMEOUT_S = 5.0


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


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {sample name: value summed over label sets}.

    Labels (``model_name``, ``engine``) are summed away: one lane serves one
    model. Unparseable text gives an empty dict.
    """
    out: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[sample.name] = out.get(sample.name, 0.0) + float(sample.value)
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
            base_url=self.base_url, timeout=timeout, transport=transport, trust_env=False
        )

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

    async def metrics(self) -> dict[str, float]:
        try:
            r = await self._client.get("/metrics")
        except httpx.TransportError:
            return {}
        return parse_metrics(r.text) if r.status_code == 200 else {}

    async def first_token(self, model: str, prompt: str = "Say OK.") -> float | None:
        """Seconds from sending one streaming chat request (max_tokens 1) to
        its first content chunk; None when none came."""
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 1,
            "stream": True,
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
            if isinstance(part, dict) and (part.get("content") or part.get("reasoning_content")):
                return True
        if choice.get("text"):
            return True
    return False
