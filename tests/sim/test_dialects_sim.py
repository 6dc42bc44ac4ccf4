"""The simulator speaks each engine dialect from the wheels' own strings
(sim/dialects/): a rendered recipe's boot, read by the phase tracker, goes
through the boot order of its version; the lines carry the source's own
``[file.py:LINE]``; a SIGKILLed engine core turns /health 503 and then closes
the port; an SGLang lane rendered by us serves /metrics."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from itertools import pairwise

import httpx
import pytest

from sparktui.core.config import Config
from sparktui.core.logsig import Phase
from sparktui.core.phases import PhaseTracker
from sparktui.sim.cluster import Sim
from sparktui.sim.dialects import load
from sparktui.sim.spec import spec_from_config
from sparktui.sim.testing import running_sim

from .test_engine import health

VLLM_LANE = "glm53-flash-eugr-2x"  # 2 nodes, no KV pin
PINNED_LANE = "glm53-full-mxfp4-4x-dspark8"  # 4 nodes, a 9 GiB KV pin
SGLANG_LANE = "dsv41-flash-sglang-4x"


def tracked(sim: Sim, lane: str) -> tuple[PhaseTracker, dict[int, list[str]]]:
    """Every rank's log, merged by time, through one lane tracker."""
    lines: list[tuple[float, int, str]] = []
    for node in sim.nodes.values():
        for c in node.docker.containers.values():
            if c.labels.get("sparktui.lane") == lane:
                rank = int(c.labels["sparktui.rank"])
                lines += [(ln.t, rank, ln.text) for ln in c.logs]
    lines.sort(key=lambda x: (x[0], x[1]))
    t = PhaseTracker(lane, stall_after_s=3600, start=0.0)
    by_rank: dict[int, list[str]] = {}
    for when, rank, text in lines:
        t.feed(rank, text, when)
        by_rank.setdefault(rank, []).append(text)
    return t, by_rank


@pytest.mark.parametrize("dialect", ["vllm-0.11", "vllm-0.33"])
@pytest.mark.parametrize("lane", [VLLM_LANE, PINNED_LANE])
async def test_vllm_boot_order_in_each_dialect(fleet: Config, serve, dialect: str,
                                               lane: str) -> None:
    d = load(dialect)
    spec = spec_from_config(fleet)
    spec.dialect = dialect
    async with running_sim(spec=spec, scenario="normal") as sim:
        await serve(sim, lane)
        await sim.advance(4 * 3600)
        assert await health(sim, "dgx1") == 200
        t, logs = tracked(sim, lane)
    order = [p for p in t.phase_times if p is not Phase.SERVING]
    assert order == [Phase.STARTING, Phase.LOADING, Phase.KV_ALLOC, Phase.GRAPH_CAPTURE,
                     Phase.API_STARTING], order
    assert t.failure is None and t.kv.tokens
    head = "\n".join(logs[0])
    load_key = "load_start_v2" if dialect == "vllm-0.33" else "load_start_v1"
    assert f"[{d.entry(load_key).where}] " in head  # the source's own file:line
    assert "Uvicorn running on" not in head
    # the weight bar on the global first rank only (enable_tqdm: get_rank() == 0,
    # 0.33 weight_utils.py:845, 0.11 :510), never on a worker rank of another node
    assert any("% Completed | " in ln for ln in logs[0])
    assert not any("% Completed | " in ln for rank, lines in logs.items() if rank
                   for ln in lines)
    assert len(logs) > 1 and set(t.rank_shards()) <= {0}
    pinned = lane == PINNED_LANE
    assert ("Initial free memory" in head) is pinned
    assert ("Available KV cache memory" in head) is not pinned
    if dialect == "vllm-0.33":
        profiling = not pinned  # V2 measures its graphs before the KV cache, unless pinned
        first_done = head.index("Graph capturing finished")
        assert (first_done < head.index("KV cache size")) is profiling
    else:
        assert "\x1b[1;36m(EngineCore_DP0 pid=" in head  # 0.11's process prefix


async def test_stats_every_ten_seconds_while_busy(fleet: Config, serve) -> None:
    async with running_sim(fleet, scenario="normal") as sim:
        await serve(sim, VLLM_LANE)
        await sim.advance(4 * 3600)
        c = next(c for c in sim.nodes["dgx1"].docker.containers.values()
                 if c.labels.get("sparktui.lane") == VLLM_LANE)
        before = sum("Avg prompt throughput" in ln.text for ln in c.logs)
        await sim.advance(120)  # idle: DEBUG, nothing at INFO
        assert sum("Avg prompt throughput" in ln.text for ln in c.logs) == before
        req = sim.run_prompt(VLLM_LANE, 60_000, max_tokens=200)
        while not req.done:
            await sim.advance(10)
        stats = [ln for ln in c.logs if "Avg prompt throughput" in ln.text][before:]
    assert len(stats) >= 2 and all("Engine 000: Avg prompt throughput" in ln.text
                                   for ln in stats)
    gaps = {round(b.t - a.t) for a, b in pairwise(stats)}
    assert gaps == {10}, gaps


async def test_a_killed_engine_core_is_503_then_a_closed_port(fleet: Config, serve) -> None:
    async with running_sim(fleet, scenario="core-exit") as sim:
        await serve(sim, VLLM_LANE)
        await sim.advance(4 * 3600)  # serving since well over 600 s: the core was killed
        c = next(c for c in sim.nodes["dgx1"].docker.containers.values()
                 if c.labels.get("sparktui.lane") == VLLM_LANE)
        dead = [ln.t for ln in c.logs if "MPClient: engine core exited unexpectedly" in ln.text]
        assert len(dead) == 1
        assert c.status == "exited" and c.finished_t == pytest.approx(dead[0] + 5.0)
        assert await health(sim, "dgx1") == "refused"


async def test_a_core_exit_answers_503_before_the_server_goes(fleet: Config, serve) -> None:
    async with running_sim(fleet, scenario="core-exit") as sim:  # killed 600 s into serving
        await serve(sim, VLLM_LANE)
        while await health(sim, "dgx1") != 200:
            await sim.advance(60)
        c = next(c for c in sim.nodes["dgx1"].docker.containers.values()
                 if c.labels.get("sparktui.lane") == VLLM_LANE)
        while not any("MPClient" in ln.text for ln in c.logs):
            await sim.advance(1)
        assert await health(sim, "dgx1") == 503  # a dead core, the server still up
        await sim.advance(6)
        assert await health(sim, "dgx1") == "refused"


async def test_an_sglang_lane_rendered_by_us_serves_metrics(fleet: Config, serve) -> None:
    async with running_sim(fleet, scenario="normal") as sim:
        await serve(sim, SGLANG_LANE)
        await sim.advance(4 * 3600)
        t, logs = tracked(sim, SGLANG_LANE)
        host = sim.nodes["dgx1"].api_host
        async with httpx.AsyncClient(base_url=f"http://{host}:30000", timeout=5) as client:
            r = await client.get("/metrics")
    assert r.status_code == 200
    assert t.phase is Phase.SERVING and t.failure is None
    head = "\n".join(logs[0])
    assert "% Completed | " in head and "\r" in head  # the \r-only shard bar, one line
    # uvicorn.Server.run() binds its socket (http_server.py:3010), so uvicorn says where
    # (0.55 server.py:198-199), in SGLang's format for it (utils/common.py:3512), after
    # the lifespan and before the warmup's "fired up"; an API line, no phase of its own
    from sparktui.core.logsig import Kind, classify
    up = [i for i, ln in enumerate(logs[0]) if "Uvicorn running on" in ln]
    assert len(up) == 1, up
    line = logs[0][up[0]]
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO:     Uvicorn running on "
                        r"http://0\.0\.0\.0:30000 \(Press CTRL\+C to quit\)", line), line
    assert logs[0][up[0] - 1].endswith("] INFO:     Application startup complete.")
    assert "The server is fired up" in "".join(logs[0][up[0] + 1:])
    ev = classify(line)
    assert ev is not None and ev.kind is Kind.API_STARTING and ev.phase is None
    assert ev.fields["url"] == "http://0.0.0.0:30000"
    assert Phase.API_STARTING not in t.phase_times  # SGLang has no line for it
    assert not any("Uvicorn running on" in ln for rank, lines in logs.items() if rank
                   for ln in lines)  # the other nodes' health server: uvicorn at "warning"
    # (launch_dummy_health_check_server, srt/utils/common.py:3655-3664; engine.py:1281)


@pytest.mark.parametrize("lane,port,nested", [(VLLM_LANE, 8000, True),
                                               (SGLANG_LANE, 30000, False)])
async def test_an_error_answer_has_its_engines_body(fleet: Config, serve, lane: str, port: int,
                                                    nested: bool) -> None:
    """A prompt past the context: vLLM's ``{"error": {...}}`` (0.33
    ``entrypoints/serve/engine/protocol.py:86``), SGLang's flat body
    (``srt/entrypoints/openai/protocol.py:106``); the console's client reads both."""
    from sparktui.adapters.engine_http import EngineClient

    async with running_sim(fleet, scenario="normal") as sim:
        await serve(sim, lane)
        await sim.advance(4 * 3600)
        host = sim.nodes["dgx1"].api_host
        model = sim.lane_rank0(lane).args.name
        body = {"model": model, "max_tokens": 4, "prompt_tokens_hint": 10**7,
                "messages": [{"role": "user", "content": "hi"}]}
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=5) as c:
            r = await c.post("/v1/chat/completions", json=body)
        async with EngineClient(host, port, timeout=5) as client:
            answer = await client.chat(model, "hi", max_tokens=10**7, timeout=5.0)
    assert r.status_code == 400
    got = r.json()
    error = got["error"] if nested else got
    assert ("object" in got) is not nested
    assert error["type"] == "BadRequestError" and error["code"] == 400
    assert "maximum context length" in error["message"]
    assert answer.error.startswith("HTTP 400: BadRequestError: This model's maximum context")


async def test_an_sglang_rank_crash_reads_as_sglang_prints_it(fleet: Config, serve) -> None:
    """cache-not-symlink on an SGLang lane: the scheduler's one-line traceback
    header, the root cause after it, sigquit, and the tree's own SIGKILL (137),
    which is not called an OOM."""
    async with running_sim(fleet, scenario="cache-not-symlink") as sim:
        await serve(sim, SGLANG_LANE, "4nodes-switch-b")  # dgx5-8: dgx6-8 lack the symlink
        await sim.advance(600)
        t, _ = tracked(sim, SGLANG_LANE)
        codes = {c.exit_code for n in sim.nodes.values() for c in n.docker.containers.values()
                 if c.labels.get("sparktui.lane") == SGLANG_LANE and c.status == "exited"}
    f = t.failure
    assert f is not None and f.rank in (1, 2, 3)
    assert f.line.startswith("Scheduler hit an exception: Traceback (most recent call last):")
    assert f.cause is not None and "LocalEntryNotFoundError" in f.cause
    assert 137 in codes and "OOM" not in f.describe()


@pytest.mark.parametrize("dialect,key", [("vllm-0.33", "reasoning"),
                                         ("vllm-0.11", "reasoning_content")])
async def test_a_reasoning_lane_streams_its_dialects_field(fleet: Config, serve, dialect: str,
                                                           key: str) -> None:
    """--reasoning-parser (glm53-flash-eugr-2x): the first tokens come as
    reasoning in the release's own field, unless the template is asked not to
    think; the console's first-token probe passes either way."""
    from sparktui.adapters.engine_http import EngineClient

    spec = spec_from_config(fleet)
    spec.dialect = dialect
    async with running_sim(spec=spec, scenario="normal") as sim:
        await serve(sim, VLLM_LANE)
        await sim.advance(4 * 3600)
        host = sim.nodes["dgx1"].api_host
        body = {"model": "zai-org/GLM-5.3-Flash", "stream": True, "max_tokens": 8,
                "messages": [{"role": "user", "content": "hi"}]}

        async def first_delta(extra: dict[str, object]) -> dict[str, object]:
            async with httpx.AsyncClient(base_url=f"http://{host}:8000", timeout=10) as c, \
                    c.stream("POST", "/v1/chat/completions", json=body | extra) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: {"):
                        return json.loads(line[6:])["choices"][0]["delta"]
            raise AssertionError("no chunk")

        async def drive(coro):
            task = asyncio.ensure_future(coro)
            while not task.done():
                await sim.advance(1)
                await asyncio.sleep(0.01)
            return task.result()

        assert key in await drive(first_delta({}))
        assert "content" in await drive(first_delta(
            {"chat_template_kwargs": {"enable_thinking": False}}))
        async with EngineClient(host, 8000, timeout=10) as client:
            assert await drive(client.first_token("zai-org/GLM-5.3-Flash")) is not None


def _families(text: str) -> dict[str, tuple[str, str]]:
    """``# HELP`` / ``# TYPE`` lines of a Prometheus text page: name -> (type, help)."""
    helps = dict(line[7:].split(" ", 1) for line in text.splitlines()
                 if line.startswith("# HELP "))
    return {name: (kind, helps.get(name, "")) for name, kind in
            (line[7:].split(" ", 1) for line in text.splitlines() if line.startswith("# TYPE "))}


async def test_vllm_metrics_carry_the_api_servers_process_series(fleet: Config, serve) -> None:
    """vLLM (one API server) serves prometheus_client's default registry: the
    ProcessCollector's series, by its own names, help and types (compared with
    the real collector's here), the start time the container's; SGLang's
    multiprocess registry has none."""
    from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

    real = CollectorRegistry()
    ProcessCollector(registry=real)
    want = _families(generate_latest(real).decode())
    assert "process_start_time_seconds" in want and "process_open_fds" in want
    async with running_sim(fleet, scenario="normal") as sim:
        await serve(sim, VLLM_LANE)
        await serve(sim, SGLANG_LANE, "4nodes-switch-b")  # dgx5-8: beside it
        await sim.advance(4 * 3600)
        c = next(c for c in sim.nodes["dgx1"].docker.containers.values()
                 if c.labels.get("sparktui.lane") == VLLM_LANE)
        sg_node = next(n for n in sim.nodes.values() for c in n.docker.containers.values()
                       if c.labels.get("sparktui.lane") == SGLANG_LANE
                       and c.labels.get("sparktui.rank") == "0")
        async with httpx.AsyncClient(timeout=5) as client:
            vllm = (await client.get(f"http://{sim.nodes['dgx1'].api_host}:8000/metrics")).text
            sglang = (await client.get(f"http://{sg_node.api_host}:30000/metrics")).text
    got = _families(vllm)
    assert {k: v for k, v in got.items() if k.startswith("process_")} == want
    values = {line.split(" ")[0]: float(line.split(" ")[1]) for line in vllm.splitlines()
              if line.startswith("process_")}
    assert values["process_start_time_seconds"] == c.started_t
    assert values["process_cpu_seconds_total"] > 0 and values["process_resident_memory_bytes"] > 0
    assert "sglang:num_running_reqs" in sglang and "process_" not in sglang


def test_the_config_key_is_the_simulators_dialect(fleet: Config) -> None:
    config = replace(fleet, simulator=replace(fleet.simulator, dialect="vllm-0.11"))
    assert spec_from_config(config).dialect == "vllm-0.11"
    assert spec_from_config(fleet).dialect == "vllm-0.33"


async def test_flag_over_scenario_over_config(fleet: Config, tmp_path) -> None:
    """core-exit reproduces vLLM 0.33's one-line core death: it speaks 0.33
    whatever the config says, unless ``sim --dialect`` asks otherwise."""
    from sparktui.sim.runner import published_sim

    old = replace(fleet, simulator=replace(fleet.simulator, dialect="vllm-0.11"),
                  console=replace(fleet.console, state_dir=str(tmp_path / "state")))
    async with published_sim(old, scenario="core-exit", speed=1.0) as sim:
        assert sim.spec.dialect == "vllm-0.33"
    async with published_sim(old, scenario="normal", speed=1.0) as sim:
        assert sim.spec.dialect == "vllm-0.11"
    async with published_sim(old, scenario="core-exit", speed=1.0, dialect="vllm-0.11") as sim:
        assert sim.spec.dialect == "vllm-0.11"
        sim.set_scenario("normal")
        assert sim.spec.dialect == "vllm-0.11"


async def test_an_sglang_started_without_enable_metrics_serves_no_metrics(
        fleet: Config) -> None:
    """SGLang 0.5.23 mounts /metrics only with --enable-metrics (off by default,
    ``srt/arg_groups/fields/observability.py:70``; ``http_server.py:315``): the
    same lane rendered without it serves and answers /metrics 404."""
    from sparktui.core.recipe_load import load_recipe
    from sparktui.core.render import plan

    from .conftest import exec_on

    recipe = load_recipe(fleet, SGLANG_LANE)
    for rank in plan(fleet, recipe, recipe.cluster).ranks:
        assert "--enable-metrics" in rank.command(3)
    async with running_sim(fleet, scenario="normal") as sim:
        for rank in plan(fleet, recipe, recipe.cluster).ranks:
            _, _, status = await exec_on(sim, rank.node,
                                         rank.command(3).replace(" --enable-metrics", ""))
            assert status == 0
        await sim.advance(4 * 3600)
        assert sim.lane_rank0(SGLANG_LANE).phase == "ready"
        host = sim.nodes["dgx1"].api_host
        async with httpx.AsyncClient(base_url=f"http://{host}:30000", timeout=5) as client:
            assert (await client.get("/health")).status_code == 200
            assert (await client.get("/metrics")).status_code == 404


async def test_a_vllm_with_disable_log_stats_answers_metrics_without_its_series(
        fleet: Config) -> None:
    """vLLM 0.33 with ``--disable-log-stats`` makes no stat logger
    (``v1/engine/async_llm.py:159``, ``:204-214``): no PrometheusStatLogger
    (``v1/metrics/loggers.py:1416-1419``) and no 10 s stats line, while
    ``/metrics`` stays mounted (``entrypoints/serve/instrumentator/metrics.py:56-81``)
    with the default registry's process series: what ``sparktui check`` says."""
    from sparktui.core.lint import lint
    from sparktui.core.recipe_load import load_recipe
    from sparktui.core.render import plan

    from .conftest import exec_on

    recipe = load_recipe(fleet, VLLM_LANE)
    blind = replace(recipe, extra_args=(*recipe.extra_args, "--disable-log-stats"))
    said = [w.message for w in lint(fleet, blind) if w.key == "extra_args"]
    assert len(said) == 1 and "still answers /metrics, but with no vllm: series" in said[0]
    async with running_sim(fleet, scenario="normal") as sim:
        for rank in plan(fleet, blind, blind.cluster).ranks:
            assert "--disable-log-stats" in rank.command(3)
            _, _, status = await exec_on(sim, rank.node, rank.command(3))
            assert status == 0
        await sim.advance(4 * 3600)
        assert await health(sim, "dgx1") == 200
        req = sim.run_prompt(VLLM_LANE, 60_000, max_tokens=200)
        while not req.done:
            await sim.advance(10)
        host = sim.nodes["dgx1"].api_host
        async with httpx.AsyncClient(base_url=f"http://{host}:8000", timeout=5) as client:
            r = await client.get("/metrics")
        logs = [ln.text for c in sim.nodes["dgx1"].docker.containers.values() for ln in c.logs]
    assert r.status_code == 200 and "process_start_time_seconds" in r.text
    assert "vllm:" not in r.text
    assert not any("Avg prompt throughput" in ln for ln in logs)


async def test_an_instanttensor_load_prints_its_byte_bar_on_rank_0_only(fleet: Config,
                                                                         serve) -> None:
    """vLLM 0.33's InstantTensor loader prints no logger line, only rank 0's
    tqdm over the bytes (model_loader/weight_utils.py:1457-1467, enable_tqdm
    :845; unit "B", unit_divisor 1024, _BAR_FORMAT :842). The strings below
    are tqdm 4.70.1's format_meter for the same figures (checked with tqdm
    itself); each is read as byte progress, and the lane goes through loading."""
    from sparktui.core.logsig import Kind, classify
    from sparktui.sim.engine_vllm import byte_bar

    d = load("vllm-0.33")
    assert byte_bar(d, 0, 376e9, 0) == ("Loading safetensors using InstantTensor loader:   0% "
                                        "Completed | 0.00/350G [00:00<?, ?B/s]")
    assert byte_bar(d, 188e9, 376e9, 1440) == (
        "Loading safetensors using InstantTensor loader:  50% Completed | 175G/350G "
        "[24:00<24:00, 131MB/s]")
    assert byte_bar(d, 1e6, 376e9, 0.5).endswith("| 977k/350G [00:00<52:13:19, 2.00MB/s]")
    async with running_sim(fleet, scenario="normal") as sim:
        await serve(sim, PINNED_LANE)  # load_format instanttensor, 376 GB
        await sim.advance(4 * 3600)
        assert await health(sim, "dgx1") == 200
        t, logs = tracked(sim, PINNED_LANE)
    bars = [ln for ln in logs[0] if "InstantTensor" in ln]
    assert bars[0] == "\r" + byte_bar(d, 0, 376e9, 0)
    assert bars[-1].startswith("\rLoading safetensors using InstantTensor loader: 100% "
                               "Completed | 350G/350G [")
    assert len(bars) > 2 and all(ln.startswith("\rLoading safetensors using InstantTensor "
                                               "loader: ") for ln in bars)
    for ln in bars:
        m = classify(ln.lstrip("\r"))
        assert m is not None and m.kind is Kind.LOAD_BYTES, ln
    assert not any("InstantTensor" in ln or "% Completed" in ln
                   for rank, lines in logs.items() if rank for ln in lines)
    assert Phase.LOADING in t.phase_times and t.failure is None


async def test_a_vllm_033_traceback_is_under_its_header_then_raw(fleet: Config, serve) -> None:
    """``logger.exception`` in 0.33 repeats the header after every ``\\n`` of
    the message (``logging_utils/formatter.py:77``: each line ends in ``\\r``),
    then multiprocessing prints the same traceback raw; the tracker's cause is
    the exception's own line, once."""
    lane = "dsv41-flash-8x-lab-gmu091"
    async with running_sim(fleet, scenario="gmu-091") as sim:  # refused at admission
        await serve(sim, lane)
        await sim.advance(60)
        t, logs = tracked(sim, lane)
    head = logs[0]
    failed = next(i for i, ln in enumerate(head) if "EngineCore failed to start." in ln)
    header = head[failed].split("EngineCore failed to start.")[0]
    assert header.startswith("(EngineCore_DP0 pid=") and " ERROR " in header \
        and header.endswith(f"[{load('vllm-0.33').entry('core_failed').where}] ")
    logged = head[failed:head.index("Process EngineCore_DP0:")]
    assert len(logged) > 4 and all(ln.startswith(header) and ln.endswith("\r")
                                   for ln in logged[:-1]), logged
    assert logged[-1].startswith(header + "ValueError: Free memory on device cuda:0")
    raw = head[head.index("Process EngineCore_DP0:") + 1:]
    assert raw[0] == "Traceback (most recent call last):"
    assert [ln.removeprefix(header).rstrip("\r") for ln in logged[1:]] == raw[:len(logged) - 1]
    f = t.failure
    assert f is not None and f.rank == 0 and f.line == "EngineCore failed to start."
    assert f.cause is not None and f.cause.startswith("ValueError: Free memory on device cuda:0")


async def test_sglangs_shard_bar_is_one_line_of_carriage_returns(fleet: Config, serve) -> None:
    """SGLang 0.5.23's BAR_FORMAT has no ``\\n`` (``srt/utils/common.py:1414``):
    tqdm redraws with ``\\r`` only, so the whole bar is one physical line,
    closed when the load ends, on rank 0 only."""
    async with running_sim(fleet, scenario="normal") as sim:
        await serve(sim, SGLANG_LANE)
        await sim.advance(4 * 3600)
        _, logs = tracked(sim, SGLANG_LANE)
    bars = [ln for ln in logs[0] if "% Completed |" in ln]
    assert len(bars) == 1, bars
    redraws = bars[0].split("\r")
    assert redraws[0] == "" and len(redraws) > 2
    assert all(r.startswith("Loading safetensors checkpoint shards: ") and " Completed | " in r
               and not r.endswith("\n") for r in redraws[1:])
    assert redraws[-1].startswith("Loading safetensors checkpoint shards: 100% Completed | ")
    assert not any("% Completed |" in ln for rank, lines in logs.items() if rank for ln in lines)


def test_the_incident_scenarios_speak_vllm_033_and_sglang_05(fleet: Config) -> None:
    """The seed incidents' tests (tests/sim/test_scenarios.py, one per incident;
    tests/ops/test_scenarios_sim.py; the service's nights, tests/service/simnight.py)
    run on the shipped config: in every scenario a vLLM engine speaks vllm-0.33
    and an SGLang one sglang-0.5 (the SGLang tests: test_canary_sglang_sim,
    test_engine_sglang_*, this file's), unless a test asks for another release."""
    from sparktui.sim.dialects import for_engine
    from sparktui.sim.scenarios import SCENARIOS, apply_scenario

    assert fleet.simulator.dialect == "vllm-0.33"
    for name in SCENARIOS:
        spec = apply_scenario(spec_from_config(fleet), name)
        assert for_engine("vllm", spec.dialect).name == "vllm-0.33", name
        assert for_engine("sglang", spec.dialect).name == "sglang-0.5", name


async def test_sglang_logs_by_batch_not_by_time(fleet: Config, serve) -> None:
    """SGLang 0.5.23 logs a prefill batch once each chunk's forward is done
    (metrics_reporter.py:753, from batch_result_processor.py:510) and a
    decode batch every 40 decode steps (decode_log_interval,
    srt/arg_groups/fields/observability.py:136;
    metrics_reporter.py:934), with its speculation's accept length, and
    nothing on a timer or while idle; the console reads both as stats."""
    from sparktui.core.logsig import Kind, classify

    async with running_sim(fleet, scenario="normal") as sim:
        await serve(sim, SGLANG_LANE)
        await sim.advance(4 * 3600)
        engine = sim.lane_rank0(SGLANG_LANE)
        c = engine.container

        def batches(kind: str) -> list:
            return [ln for ln in c.logs if f"] {kind} batch, " in ln.text]

        idle = (len(batches("Prefill")), len(batches("Decode")))
        await sim.advance(300)
        assert (len(batches("Prefill")), len(batches("Decode"))) == idle  # idle: silent
        req = sim.run_prompt(SGLANG_LANE, 20_000, max_tokens=700)
        while not req.done:
            await sim.advance(5)
        prefill, decode = batches("Prefill")[idle[0]:], batches("Decode")[idle[1]:]
    chunk = engine.args.max_num_batched_tokens
    assert len(prefill) == -(-20_000 // chunk)
    # a plain pool's usage, never "#token:" (pool_stats_observer.py:116), each line
    # once its chunk's forward is done (batch_result_processor.py:510)
    assert all("#token: " not in ln.text for ln in prefill)
    assert "#new-token: " + str(chunk) + ", #cached-token: 0, token usage: 0.0" in prefill[0].text
    assert prefill[0].t >= req.started_t + chunk / engine.prefill_tps() - 1e-6
    assert prefill[-1].text.split("#pending-token: ")[1].startswith("0, cuda graph: False, ")
    per_log = round(40 * engine.tokens_per_step())  # speculative: ~1.75 tokens a step
    assert len(decode) == 700 // per_log
    gaps = {round(b.t - a.t, 3) for a, b in pairwise(decode)}
    assert gaps == {round(per_log / engine.decode_tps(), 3)}, gaps
    assert all(", accept len: 1.75, accept rate: 0.15, cuda graph: True, gen throughput "
               "(token/s): " in ln.text for ln in decode)
    for ln in prefill + decode:
        ev = classify(ln.text)
        assert ev is not None and ev.kind is Kind.STATS, ln.text
