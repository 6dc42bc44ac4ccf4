"""The parser and the phase tracker against golden transcripts rendered from
the engines' own strings (tests/fixtures/dialects/, each line with its wheel's
file:line: vLLM 0.33.0 and 0.11.0, SGLang 0.5.23), not against our simulator.

Each scenario's ranks are fed in the order their lines were logged (as the
followers of all ranks would deliver them) and the outcome, the failing rank,
its first fatal line, the root cause and the phases reached are checked."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.golden import SCENARIOS, TRANSCRIPTS, read, scenario
from sparktui.core.logsig import Kind, Phase, classify, container_exit, parse_timestamp
from sparktui.core.phases import PhaseTracker

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dialects"


def _builder():  # the generator of the golden files, loaded as a module
    spec = importlib.util.spec_from_file_location("build_transcripts",
                                                  FIXTURES / "build_transcripts.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def play(name: str, stall_after_s: float = 600.0) -> PhaseTracker:
    """Every rank's lines and container ends, merged by docker's time."""
    meta, ranks = scenario(name)
    t0 = min(parse_timestamp(lines[0][0]) or 0.0 for lines in ranks.values() if lines)
    tracker = PhaseTracker(name, stall_after_s=stall_after_s, start=0.0)
    events: list[tuple[float, int, int, object]] = []
    for rank, lines in ranks.items():
        for i, (ts, text) in enumerate(lines):
            events.append(((parse_timestamp(ts) or 0.0) - t0, rank, i, (ts, text)))
        end = meta["ranks"][str(rank)]
        if end["exit_code"] is not None:
            events.append(((parse_timestamp(end["finished"]) or 0.0) - t0, rank, 10**9,
                           ("exit", end)))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    for now, rank, _, item in events:
        ts, body = item  # type: ignore[misc]
        if ts == "exit":
            tracker.feed_event(rank, container_exit(body["exit_code"]), now,
                               ts=body["finished"])
        else:
            tracker.feed(rank, body, now, ts=ts)
    last = events[-1][0] if events else 0.0
    if meta["expect"]["outcome"] == "ready":
        tracker.mark_serving(last)
    tracker.check_stall(last + stall_after_s)
    return tracker


def test_the_golden_files_are_what_the_dialects_render() -> None:
    """Regenerate with tests/fixtures/dialects/build_transcripts.py: a new
    wheel's strings (scripts/engine_dialects.py) show up here as a diff."""
    mod = _builder()
    for s in mod.scenarios():
        for name, text in mod.render(s).items():
            assert read(TRANSCRIPTS / s.name / name) == text, (s.name, name)
    assert sorted(s.name for s in mod.scenarios()) == SCENARIOS


@pytest.mark.parametrize("name", SCENARIOS)
def test_outcome_rank_cause_and_phase_order(name: str) -> None:
    meta, _ = scenario(name)
    want = meta["expect"]
    t = play(name)
    assert [p.value for p in t.phase_times] == want["phases"]
    if want["outcome"] == "ready":
        assert t.failure is None and t.phase is Phase.SERVING
    elif want["outcome"] == "stalled":
        assert t.failure is None and t.phase is Phase.STALLED
    else:
        f = t.failure
        assert f is not None and t.phase is Phase.FAILED
        assert (f.rank, f.kind.value, f.line) == (want["rank"], want["kind"], want["line"])
        assert f.cause == want["cause"]


@pytest.mark.parametrize("name", [n for n in SCENARIOS if scenario(n)[0]["expect"]["outcome"]
                                  == "ready"])
def test_uvicorn_says_where_it_runs_only_where_it_binds_the_socket(name: str) -> None:
    """``Uvicorn running on`` is logged only when uvicorn binds the socket itself
    (uvicorn 0.55 ``server.py:198-199``). vLLM binds it and hands it over (0.33
    ``launchers/launcher.py:375-379``, ``:238``; 0.11
    ``openai/api_server.py:1851-1854``, ``launcher.py:67-68``): never printed, and
    its boot reaches API starting on its own line (``Starting vLLM server on``,
    0.33 ``launchers/api_server/entry.py:139``). SGLang runs ``uvicorn.Server.run()``
    (``srt/entrypoints/http_server.py:3010``) at ``info``: once, on the head, a
    line of no phase, between ``Application startup complete.`` and ``fired up``."""
    meta, ranks = scenario(name)
    lines = [(rank, text) for rank, got in ranks.items() for _, text in got]
    said = [(rank, text) for rank, text in lines if "Uvicorn running on" in text]
    t = play(name)
    if meta["dialect"].startswith("vllm"):
        assert said == [] and Phase.API_STARTING in t.phase_times
        return
    assert [rank for rank, _ in said] == [0]
    ev = classify(said[0][1])
    assert ev is not None and ev.kind is Kind.API_STARTING and ev.phase is None
    assert ev.text == "Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"
    head = [text for _, text in ranks[0]]
    at = head.index(said[0][1])
    assert head[at - 1].endswith("INFO:     Application startup complete.")
    assert any("The server is fired up" in text for text in head[at + 1:])


@pytest.mark.parametrize("name", [n for n in SCENARIOS if "2node" not in n])
def test_kv_pool_is_read_in_every_healthy_dialect(name: str) -> None:
    meta, _ = scenario(name)
    if meta["expect"]["outcome"] != "ready":
        return
    assert play(name).kv.tokens == 412_160


def test_v2_profiling_pass_is_kv_allocation_not_api_starting() -> None:
    """Model Runner V2's first ``Graph capturing finished`` comes before the
    KV cache exists (gpu_worker.py:717): the lane is still allocating KV."""
    _, ranks = scenario("vllm033-v2-single-reasoning")
    t = PhaseTracker("l", stall_after_s=600, start=0.0)
    for ts, text in ranks[0]:
        t.feed(0, text, 1.0, ts=ts)
        if "Available KV cache memory" in text:
            break
    assert t.phase is Phase.KV_ALLOC
    assert Phase.API_STARTING not in t.phase_times


def test_kv_pin_line_is_kv_allocation() -> None:
    _, ranks = scenario("vllm033-v2-pin-2node")
    pin = [text for _, text in ranks[1] if "Initial free memory" in text]
    ev = classify(pin[0])
    assert ev is not None and ev.kind is Kind.KV_MEMORY and ev.phase is Phase.KV_ALLOC
    assert ev.fields["gib"] == "32.0"  # format_gib rounds to 2 places: a float


def test_a_137_alone_is_not_called_oom() -> None:
    ev = container_exit(137)
    assert "OOM" not in ev.text and "SIGKILL" in ev.text
    assert "OOM" in container_exit(137, oom_killed=True).text


_TB_LINES = st.sampled_from([
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/x.py", line 3, in f',
    '    raise RuntimeError(f"NCCL error: {error_str}")',
    '    raise TimeoutError(f"RPC call to {method} timed out.") from e',
    "TimeoutError", "", "The above exception was the direct cause of the following exception:",
])


@settings(max_examples=200, deadline=None)
@given(st.lists(_TB_LINES, max_size=12), st.sampled_from(["", "(EngineCore_DP0 pid=7) ERROR "
                                                          "12-02 01:00:00 [core.py:1586] "]))
def test_a_raise_source_line_is_never_the_root_cause(lines: list[str], prefix: str) -> None:
    """A frame's ``raise X(f"...")`` source line holds a signature's words
    (``NCCL error: {error_str}``) but is code, not the error: whatever frames
    come around it, under either prefix, the cause is the ``X: message`` line."""
    t = PhaseTracker("l", stall_after_s=600, start=0.0)
    t.feed(0, prefix + "EngineCore failed to start.", 1.0)
    for line in lines:
        t.feed(0, prefix + line, 1.0)
    t.feed(0, prefix + "TimeoutError: RPC call to sample_tokens timed out.", 1.0)
    assert t.failure is not None
    assert t.failure.cause == "TimeoutError: RPC call to sample_tokens timed out."
    for line in lines:
        ev = classify(prefix + line)
        assert ev is None or not ev.fatal


_NUM = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
_TOKENS = st.integers(min_value=1, max_value=10**8)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["vllm-0.33", "vllm-0.11"]), _NUM, _NUM, st.integers(0, 999),
       st.integers(0, 999), _TOKENS, st.floats(0, 100, allow_nan=False))
def test_every_rendered_vllm_line_reads_back(dialect: str, a: float, b: float, running: int,
                                             waiting: int, tokens: int, pct: float) -> None:
    """Whatever numbers the engine fills into its own format strings, under
    its own prefix, the line classifies as its kind with those numbers."""
    from sparktui.sim.dialects import load

    d = load(dialect)

    def read(key: str, *args: object) -> dict[str, str]:
        line = d.log(key, *args, when=1.8e9, proc="EngineCore_DP0", pid=7)[0]
        ev = classify(line)
        assert ev is not None, line
        return dict(ev.fields) | {"kind": ev.kind.value}

    if dialect == "vllm-0.33":
        stats = d.msg("stats_prefix", 0) + ", ".join((d.msg("stats", a, b, running, waiting),
                                                      d.msg("stats_kv", "GPU", pct),
                                                      d.msg("stats_hit", pct)))
        got = read("kv_size", "GPU", f"{tokens:,}", "131,072", a)
        assert got["kind"] == "kv_cache" and got["tokens"] == f"{tokens:,}"
    else:
        stats = d.msg("stats", 0, a, b, running, waiting, pct, pct)
        got = read("kv_size", f"{tokens:,}")
        assert got["kind"] == "kv_cache" and got["tokens"] == f"{tokens:,}"
    ev = classify(d.record(stats, when=1.8e9, where="loggers.py:1", proc="APIServer")[0])
    assert ev is not None and ev.kind is Kind.STATS
    assert (ev.fields["running"], ev.fields["waiting"]) == (str(running), str(waiting))
    assert float(ev.fields["prompt_tps"]) == pytest.approx(round(a, 1), abs=0.051)
    got = read("kv_available", round(b, 2))
    assert got["kind"] == "kv_memory"
    got = read("kv_pin", round(a, 2), round(b, 2))
    assert got["kind"] == "kv_memory" and float(got["gib"]) == pytest.approx(round(b, 2),
                                                                             abs=0.006)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 999), st.integers(0, 10**7), st.floats(0, 1, allow_nan=False),
       st.booleans(), _NUM, st.integers(0, 999), st.sampled_from(["", " TP0", " TP3"]),
       st.sampled_from(["", "quant=fp8, fmt=e4m3, ", "quant=gptq, bits=4, "]))
def test_sglang_lines_read_back(running: int, used: int, usage: float, graph: bool, tps: float,
                                queue: int, tp: str, quant: str) -> None:
    """SGLang 0.5.23's decode line (with ``#token`` and ``cuda graph``) and a
    quantized checkpoint's ``Load weight end.`` under its ``[date TPn]`` prefix."""
    from sparktui.sim.dialects import load

    d = load("sglang-0.5")
    line = d.record(f"Decode batch, #running-req: {running}, #token: {used}, token usage: "
                    f"{usage:.2f}, cuda graph: {graph}, gen throughput (token/s): {tps:.2f}, "
                    f"#queue-req: {queue}", when=1.8e9, tp=tp)[0]
    ev = classify(line)
    assert ev is not None and ev.kind is Kind.STATS
    assert ev.fields["running"] == str(running) and ev.fields["token_usage"] == f"{usage:.2f}"
    end = d.record(f"Load weight end. elapsed=12.50 s, type=Glm4MoeForCausalLM, {quant}avail "
                   f"mem={tps:.2f} GB, mem usage=29.87 GB.", when=1.8e9, tp=tp)[0]
    ev = classify(end)
    assert ev is not None and ev.kind is Kind.LOAD_DONE and ev.fields["gb"] == "29.87"
