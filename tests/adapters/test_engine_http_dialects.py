"""The HTTP client against the engines' own shapes (not the simulator's):
vLLM 0.33 streams ``delta.reasoning`` (entrypoints/generate/base/protocol.py:359),
vLLM 0.11 and SGLang 0.5.23 ``delta.reasoning_content``; vLLM's errors are
``{"error": {...}}`` (entrypoints/serve/engine/protocol.py:86), SGLang's flat
(srt/entrypoints/openai/protocol.py:106). The dialect fixtures name each field."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparktui.adapters.engine_http import REASONING_KEYS, EngineClient, error_message
from sparktui.sim.dialects import load

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.stream_shapes import MODEL as SHAPES_MODEL
from fixtures.dialects.stream_shapes import stream


def chunk(delta: dict[str, object]) -> str:
    return "data: " + json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                   "finish_reason": None}]}) + "\n\n"


def reasoning_key(dialect: str) -> str:
    """The field the dialect's DeltaMessage declares (from the wheel's source line)."""
    text = load(dialect).entry("delta_reasoning").text
    return text.split(":", 1)[0].strip()


def sse(body: str, seen: list[dict[str, object]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=body.encode())
    return httpx.MockTransport(handle)


@pytest.mark.parametrize("dialect", ["vllm-0.33", "vllm-0.11", "sglang-0.5"])
async def test_a_reasoning_lane_passes_first_token(dialect: str) -> None:
    """The one token of a ``--reasoning-parser`` lane is reasoning: it counts,
    and the template is asked not to think."""
    key = reasoning_key(dialect)
    assert key in REASONING_KEYS
    seen: list[dict[str, object]] = []
    body = chunk({"role": "assistant", "content": ""}) + chunk({key: "Okay"}) + \
        "data: [DONE]\n\n"
    async with EngineClient("127.0.0.1", 8000, transport=sse(body, seen)) as c:
        assert await c.first_token("m") is not None
        answer = await c.chat("m", "hi", max_tokens=4, timeout=5.0)
    assert answer.reasoning == "Okay" and not answer.error
    assert seen[0]["chat_template_kwargs"] == {"thinking": False, "enable_thinking": False}
    assert seen[0]["max_tokens"] == 1


async def test_only_a_role_chunk_is_no_first_token() -> None:
    body = chunk({"role": "assistant", "content": ""}) + "data: [DONE]\n\n"
    async with EngineClient("127.0.0.1", 8000, transport=sse(body, [])) as c:
        assert await c.first_token("m") is None


VLLM_ERROR = {"error": {"message": "This model's maximum context length is 131072 tokens.",
                        "type": "BadRequestError", "param": None, "code": 400}}
SGLANG_ERROR = {"object": "error", "message": "The engine is overloaded.",
                "type": "ServiceUnavailableError", "param": None, "code": 503}


@pytest.mark.parametrize("body, want", [
    (VLLM_ERROR, "BadRequestError: This model's maximum context length is 131072 tokens."),
    (SGLANG_ERROR, "ServiceUnavailableError: The engine is overloaded."),
    ({"detail": "Not Found"}, "Not Found"),
])
async def test_error_bodies_are_read_in_each_dialect(body: dict[str, object], want: str) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json=body)
    async with EngineClient("127.0.0.1", 8000, transport=httpx.MockTransport(handle)) as c:
        answer = await c.chat("m", "hi", max_tokens=4, timeout=5.0)
    assert answer.error == f"HTTP 400: {want}"


async def test_an_error_event_inside_the_stream_is_read() -> None:
    body = chunk({"role": "assistant"}) + "data: " + json.dumps(VLLM_ERROR) + "\n\n"
    async with EngineClient("127.0.0.1", 8000, transport=sse(body, [])) as c:
        answer = await c.chat("m", "hi", max_tokens=4, timeout=5.0)
    assert answer.error.endswith("maximum context length is 131072 tokens.")


@given(st.one_of(st.text(max_size=400), st.binary(max_size=400),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                              lambda kids: st.lists(kids, max_size=4)
                              | st.dictionaries(st.sampled_from(
                                  ["error", "message", "type", "detail", "object"]), kids,
                                  max_size=4), max_leaves=12).map(json.dumps)))
def test_error_message_never_raises_and_is_bounded(body: str | bytes) -> None:
    out = error_message(body)
    assert isinstance(out, str) and len(out) <= 300


async def test_metrics_carry_the_engines_clock_from_the_date_header() -> None:
    """uvicorn's ``Date`` (the engine host's time.time(), whole seconds;
    uvicorn 0.55 server.py:252): the clock the engine's counters move on."""
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"date": "Wed, 02 Dec 2026 01:00:07 GMT"},
                              text="vllm:generation_tokens_total 7.0\n")
    async with EngineClient("127.0.0.1", 8000, transport=httpx.MockTransport(handle)) as c:
        m = await c.metrics()
    assert m == {"vllm:generation_tokens_total": 7.0}
    assert m.date == 1796173207.0

    def undated(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"date": "soon"}, text="x 1\n")
    async with EngineClient("127.0.0.1", 8000, transport=httpx.MockTransport(undated)) as c:
        assert (await c.metrics()).date is None


DIALECTS = ["vllm-0.33", "vllm-0.11", "sglang-0.5"]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_first_token_passes_on_a_reasoning_token_in_each_engines_stream(
        dialect: str) -> None:
    """max_tokens 1 on a --reasoning-parser lane whose template thinks anyway:
    the one token is reasoning, in the engine's own chunk shapes
    (tests/fixtures/dialects/stream_shapes.py, from the wheels)."""
    seen: list[dict[str, object]] = []
    body = stream(dialect, ["Okay"], [])
    async with EngineClient("127.0.0.1", 8000, transport=sse(body, seen)) as c:
        assert await c.first_token(SHAPES_MODEL) is not None
    assert seen[0]["chat_template_kwargs"] == {"thinking": False, "enable_thinking": False}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_qualify_reads_the_answer_apart_from_its_reasoning(dialect: str) -> None:
    """The gate's copy check gets the answer (``content``), the reasoning kept
    apart (``reasoning`` in vLLM 0.33, ``reasoning_content`` in 0.11 and
    SGLang): a clean copy after a reasoning block is clean, not damage."""
    from sparktui.core.qualify import PASSAGES, check_copy

    label, passage = next(iter(PASSAGES.items()))
    words = passage.split(" ")
    content = [" ".join(words[i:i + 7]) + (" " if i + 7 < len(words) else "")
               for i in range(0, len(words), 7)]
    seen: list[dict[str, object]] = []
    body = stream(dialect, ["The user wants", " the passage copied."], content)
    async with EngineClient("127.0.0.1", 8000, transport=sse(body, seen)) as c:
        answer = await c.chat(SHAPES_MODEL, "copy", max_tokens=900, timeout=5.0)
    assert not answer.error and answer.reasoning == "The user wants the passage copied."
    assert answer.content == passage
    check = check_copy(label, passage, answer.content)
    assert (check.edits, check.reasoning_chars) == (0, 0)
    assert seen[0]["chat_template_kwargs"] == {"thinking": False, "enable_thinking": False}
