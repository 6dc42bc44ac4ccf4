"""The serve workflow end to end against the simulator."""

from __future__ import annotations

from sparktui.core.recipe_load import load_recipe
from sparktui.ops.events import StepProgressed, StepStarted
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.serve import Serve, ServeOptions

SPEED = 400.0


async def run_wf(ctx, workflow):
    """The one route: plan from a fresh observation, then run that plan."""
    return await execute(ctx, await prepare(ctx, workflow))


async def test_serve_runs_through_readiness_and_releases_the_lock(sim_ctx, fleet_config):
    recipe = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    # the real-time clock: the readiness wait and the quality gate wait on real
    # time too, and a driven manual clock runs far ahead of them (seen: 20x the CPU)
    async with sim_ctx(speed=SPEED) as (sim, ctx, events):
        result = await run_wf(ctx, Serve(recipe, "4nodes-switch-b", ServeOptions(poll_s=5.0)))
        assert result.ok, result.message
        assert "serving on 4nodes-switch-b" in result.message
        steps = [e.step for e in events.of(StepStarted)]
        assert steps[:4] == ["gid rank 0", "gid rank 1", "gid rank 2", "gid rank 3"]
        assert steps[4:8] == ["start rank 0", "start rank 1", "start rank 2", "start rank 3"]
        assert steps[8:] == ["readiness", "qualify copy RU", "qualify copy EN",
                             "qualify identifiers", "qualify bench"]
        assert result.detail["qualify"]["state"] == "qualified", result.message
        assert "quality gate PASSED" in result.message
        assert result.detail["kv_tokens"]
        assert set(result.detail["stages"]) >= {"port", "health", "models"}
        assert any(isinstance(e, StepProgressed) for e in events.events)
        assert not ctx.locks.list()
        names = {c.name for n in ("dgx5", "dgx6", "dgx7", "dgx8")
                 for c in sim.nodes[n].docker.containers.values()}
        assert names == {f"sparktui-glm53-flash-eugr-2x-r{i}" for i in range(4)}
        start = next(e for e in events.of(StepStarted) if e.step == "start rank 1")
        assert "-e NCCL_IB_GID_INDEX=3" in start.action


async def test_preview_lists_every_verdict_and_the_exact_commands(sim_ctx, fleet_config):
    recipe = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx() as (sim, ctx, _events):
        pv = await prepare(ctx, Serve(recipe, "4nodes-switch-b"))
        assert pv.report.allowed
        guards_seen = {v.guard for v in pv.report.verdicts}
        assert guards_seen >= {"protected-node", "blocking-switch", "fit", "runlock", "online",
                               "kernel", "nas-mount", "hf-cache", "image", "stale-container",
                               "node-busy"}
        actions = [s.action for s in pv.steps]
        assert any(a.startswith("docker run -d --name sparktui-glm53-flash-eugr-2x-r0") for a in
                   actions)
        assert not sim.ha.calls


async def test_a_node_lost_after_confirmation_refuses_at_run_time(sim_ctx, fleet_config):
    recipe = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx() as (sim, ctx, _):
        confirmed = await prepare(ctx, Serve(recipe, "4nodes-switch-b"))
        assert confirmed.report.allowed
        sim.set_power("dgx6", False)
        await sim.settle()
        result = await execute(ctx, confirmed)
        assert not result.ok and "dgx6 is" in result.message
        assert not any(sim.nodes[n].docker.containers for n in sim.nodes)


async def test_a_serve_whose_gate_says_garbled_fails(sim_ctx, fleet_config):
    """The r37 lab tree garbles DS4.1: the lane serves, but `serve` must not
    report a plain success (exit 0) for a lane that is unqualified."""
    recipe = load_recipe(fleet_config, "dsv41-flash-eugr-0913-4x")
    async with sim_ctx("r37-garble", speed=SPEED) as (_sim, ctx, _events):
        result = await run_wf(ctx, Serve(recipe, "4nodes-switch-b", ServeOptions(poll_s=5.0)))
        assert result.detail.get("qualify", {}).get("state") == "garbled", result.message
        assert not result.ok
        assert "serving on" in result.message and "GARBLED" in result.message
        assert ", UNQUALIFIED (garbled): quality gate: GARBLED" in result.message
