"""The long-prompt ladder against the simulator (manual clock, real SSH and
HTTP): on the 22:45 incident lane (196608 window, 11 GiB KV pin) it climbs
8K -> 32K -> 64K, refuses 128K on its prediction before any node thrashes, and
writes a fit whose ceiling is within 5 % of the simulator's hidden truth; on
the safe 131K lane it completes every rung. Each rung is journaled."""

from __future__ import annotations

import asyncio
import re

from sparktui.core.fit import fit
from sparktui.core.recipe_load import load_recipe
from sparktui.ops.context import OpsContext
from sparktui.ops.guards import Override
from sparktui.ops.workflows.envelope import Envelope
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.qualify import Qualify
from sparktui.sim.cluster import Sim
from sparktui.sim.memory import prefill_truth

from .test_qualify_sim import boot

INCIDENT = "glm53-mxfp4-fp8-4x-r39-196k"
SAFE = "glm53-mxfp4-fp8-4x-r39"


async def climb(sim: Sim, ctx: OpsContext, lane: str):
    plan = await prepare(ctx, Envelope(lane))
    assert plan.allowed, plan.to_json()
    assert [s.step for s in plan.steps] == ["envelope rung 8K", "envelope rung 32K",
                                            "envelope rung 64K", "envelope rung 128K",
                                            "envelope record"]
    task = asyncio.create_task(execute(ctx, plan))
    start = sim.clock.monotonic()
    while not task.done():
        assert sim.clock.monotonic() - start < 3600, "the ladder did not end"
        await sim.advance(0.2)
        await asyncio.sleep(0.001)
    return plan, task.result()


def near(got: list[int], want: list[int]) -> bool:
    """The engine's prompt counts: the rung plus the question (the last rung clipped
    to the window)."""
    return len(got) == len(want) and all(0.99 < g / w < 1.01
                                         for g, w in zip(got, want, strict=True))


def truth_ceiling(sim: Sim, ctx: OpsContext, lane: str) -> int:
    recipe = load_recipe(ctx.config, lane)
    truth = prefill_truth(recipe.model.repo, recipe.engine_args.max_num_batched_tokens)
    assert truth is not None
    room = min(n.memory.headroom_gib() for n in sim.nodes.values()
               if any(c.labels.get("sparktui.lane") == lane and c.status == "running"
                      for c in n.docker.containers.values()))
    return int((room - recipe.fit.prefill_reserve_gib - truth.a_gib) / truth.b_gib_per_token)


async def test_the_incident_lane_stops_before_the_rung_that_hung_the_hosts(sim_ctx):
    async with sim_ctx("normal", speed=None) as (sim, ctx, _):
        lane = await boot(sim, ctx, INCIDENT)
        _, result = await climb(sim, ctx, lane)
        env = result.detail["envelope"]
        assert near([r["tokens"] for r in env["rungs"]], [8192, 32768, 65536])
        assert all(r["ok"] for r in env["rungs"])
        assert env["stopped_because"].startswith("131,072 tokens refused: predicted scratch")
        assert not any(n.thrashing or n.thrash_onset for n in sim.nodes.values())
        truth = truth_ceiling(sim, ctx, lane)
        assert abs(env["ceiling_tokens"] - truth) / truth < 0.05, (env, truth)
        assert env["ceiling_tokens"] < 150_000  # the 22:45 prompt is beyond it
        recipe = load_recipe(ctx.config, lane)
        line = env["scratch_fit"]
        assert recipe.fit.prefill_scratch_gib_per_token is not None
        assert abs(recipe.fit.prefill_scratch_gib_per_token / line["b_gib_per_token"] - 1) < 1e-3
        text = (ctx.config.recipes_dir / lane / "recipe.toml").read_text()
        assert "# The 2026-10-22 lane as it was at 22:45" in text  # comments kept
        assert "measured by sparktui envelope (3 rungs)" in text
        entries = ctx.journal.entries()
        steps = ["envelope rung 8K", "envelope rung 32K", "envelope rung 64K",
                 "envelope record"]
        assert [e.step for e in entries if e.kind == "intent"] == steps
        assert [e.step for e in entries if e.kind == "outcome" and e.ok] == steps
        (rung64,) = [e for e in entries if e.kind == "outcome" and e.step == "envelope rung 64K"]
        hz = float(re.search(r"\(([\d.]+) Hz\)", rung64.message).group(1))
        assert hz >= 2.0, rung64.message  # every rank's node, through the prefill
        assert result.ok
        assert recipe.fit.prefill_ceiling_tokens == env["ceiling_tokens"]
        report = fit(ctx.config, recipe, recipe.cluster)  # the fit believes the measurement
        assert report.longest_safe_prompt_tokens == env["ceiling_tokens"]
        assert any("measured by sparktui envelope is" in r for r in report.reasons)
        # the guard now knows the ceiling: the 128K rung and a d131072 bench are refused,
        # overridable by name; a prompt within it passes
        again = await prepare(ctx, Envelope(lane))
        (v,) = [v for v in again.report.verdicts if v.guard == "prompt-length"]
        assert v.refused and v.override is Override.PROMPT_LENGTH
        assert f"exceeds {lane}'s longest safe prompt, {env['ceiling_tokens']:,} tokens" \
            in v.message
        forced = await prepare(ctx, Envelope(lane, overrides=frozenset({Override.PROMPT_LENGTH})))
        assert forced.allowed and forced.report.overridden
        assert not (await prepare(ctx, Qualify(lane, 131072))).allowed
        assert (await prepare(ctx, Qualify(lane, 65536))).allowed


async def test_the_safe_lane_completes_every_rung(sim_ctx):
    async with sim_ctx("normal", speed=None) as (sim, ctx, _):
        lane = await boot(sim, ctx, SAFE)
        plan, result = await climb(sim, ctx, lane)
        env = result.detail["envelope"]
        assert near([r["tokens"] for r in env["rungs"]], [8192, 32768, 65536, 131072]), env
        assert "(130,800 within the 131,072-token window)" in plan.steps[3].action
        assert env["stopped_because"] == "completed"
        assert env["ceiling_tokens"] > 131072
        truth = truth_ceiling(sim, ctx, lane)
        assert abs(env["ceiling_tokens"] - truth) / truth < 0.05, (env, truth)
        assert env["scratch_fit"]["residual_gib"] < 0.05
        assert result.ok


async def test_a_host_that_runs_short_mid_rung_ends_the_ladder_at_once(sim_ctx):
    """The prediction said yes, the host disagrees (another process takes memory on
    dgx6 during the 32K prefill): the thrash rules' first sign ends the rung, the
    prompt is cancelled and nothing is recorded."""
    async with sim_ctx("normal", speed=None) as (sim, ctx, _):
        lane = await boot(sim, ctx, INCIDENT)
        before = (ctx.config.recipes_dir / lane / "recipe.toml").read_text()
        plan = await prepare(ctx, Envelope(lane, (8192, 32768, 65536)))
        task = asyncio.create_task(execute(ctx, plan))
        hog = False
        start = sim.clock.monotonic()
        while not task.done():
            assert sim.clock.monotonic() - start < 1800
            entries = ctx.journal.entries()
            if not hog and any(e.step == "envelope rung 32K" and e.kind == "intent"
                               for e in entries):
                await sim.advance(5.0)
                sim.nodes["dgx6"].memory.set("hog", 4.0 * 2**30)
                hog = True
            await sim.advance(0.2)
            await asyncio.sleep(0.001)
        result = task.result()
        env = result.detail["envelope"]
        assert near([r["tokens"] for r in env["rungs"]], [8192])
        assert env["stopped_because"].startswith("aborted at the first thrash-risk sign: dgx6")
        assert env["scratch_fit"] is not None and env["ceiling_tokens"] is None
        assert not result.ok
        assert (ctx.config.recipes_dir / lane / "recipe.toml").read_text() == before
