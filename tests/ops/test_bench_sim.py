"""The lane bench against the simulator (manual clock, real SSH and HTTP): its
figures follow the simulated engine's speeds within 5 %, the report and the
recipe's [qualify] figures are written, and a second run after a 30 % decode
regression (a capped GPU clock on one rank's node) flags it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sparktui.core.recipe_load import load_recipe
from sparktui.ops.context import OpsContext
from sparktui.ops.workflows.bench import LaneBench
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.sim.cluster import Sim

from .test_qualify_sim import FLASH_2X, boot


async def run_bench(sim: Sim, ctx: OpsContext, lane: str):
    plan = await prepare(ctx, LaneBench(lane))
    assert plan.allowed, plan.to_json()
    assert [s.step for s in plan.steps] == [
        "bench d0 c1", "bench d0 c2", "bench d4096 c1", "bench d4096 c2", "bench d8192 c1",
        "bench d8192 c2", "bench report", "bench record"]
    task = asyncio.create_task(execute(ctx, plan))
    start = sim.clock.monotonic()
    while not task.done():
        assert sim.clock.monotonic() - start < 1800, "the bench did not end"
        await sim.advance(0.02)
        await asyncio.sleep(0.001)
    return task.result()


async def test_bench_follows_the_engine_and_flags_a_decode_regression(sim_ctx):
    async with sim_ctx("normal", speed=None) as (sim, ctx, _):
        lane = await boot(sim, ctx, FLASH_2X)
        engine = sim.lane_rank0(lane)
        decode, prefill = engine.decode_tps(), engine.prefill_tps()
        first = await run_bench(sim, ctx, lane)
        assert first.ok, first.message
        runs = first.detail["runs"]
        assert [(r["depth"], r["concurrency"]) for r in runs] == [
            (0, 1), (0, 2), (4096, 1), (4096, 2), (8192, 1), (8192, 2)]
        assert all(list(r) == ["depth", "concurrency", "prefill_tps", "decode_tps", "ttft_ms"]
                   for r in runs)
        for r in runs:
            assert abs(r["decode_tps"] / decode - 1) < 0.05, (r, decode)
            if r["depth"] and r["concurrency"] == 1:
                assert abs(r["prefill_tps"] / prefill - 1) < 0.05, (r, prefill)
        report = Path(first.detail["report"])
        assert report.parent == ctx.config.recipes_dir / lane / "reports"
        assert report.name.endswith("_bench.json") and report.with_suffix(".md").exists()
        assert "| 4096 | 1 |" in report.with_suffix(".md").read_text()
        recipe = load_recipe(ctx.config, lane)
        assert recipe.qualify.decode_tps == runs[0]["decode_tps"]
        assert recipe.qualify.ttft_ms == runs[0]["ttft_ms"]

        sim.nodes["dgx2"].spec.decode_factor = 0.7  # the 30 % regression, on one rank
        await sim.advance(1.0)  # the next report is a second later at least
        second = await run_bench(sim, ctx, lane)
        assert not second.ok
        flagged = second.detail["regressions"]
        assert len(flagged) == 6 and all(" decode " in f for f in flagged), flagged
        assert "d0 c1 decode" in flagged[0] and "(-30%, beyond the 8% spread)" in flagged[0]
        body = json.loads(Path(second.detail["report"]).read_text())
        assert body["previous"] == report.name and body["regressions"] == flagged
        assert "REGRESSION" in second.message
