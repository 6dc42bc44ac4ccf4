"""Stop, cluster power and recover end to end against the simulator, and the
fault tests: Home Assistant 401/500/hang/unavailable, a node gone mid-step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sparktui.core.recipe_load import load_recipe
from sparktui.ops.events import GuardsEvaluated, StepStarted
from sparktui.ops.workflows.cluster_power import ClusterPower
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power import PowerCycle, PowerSwitch
from sparktui.ops.workflows.recover import Recover
from sparktui.ops.workflows.serve import Serve, ServeOptions
from sparktui.ops.workflows.stop import Stop

B = "4nodes-switch-b"
B_NODES = ("dgx5", "dgx6", "dgx7", "dgx8")


async def run_wf(ctx, workflow):
    """The one route: plan from a fresh observation, then run that plan."""
    return await execute(ctx, await prepare(ctx, workflow))


def containers(sim, nodes=B_NODES):
    return {c.name for n in nodes for c in sim.nodes[n].docker.containers.values()}


async def test_stop_stops_every_rank_head_last_and_waits_for_memory(sim_ctx, fleet_config):
    recipe = load_recipe(fleet_config, "glm53-full-mxfp4-4x-dspark8")
    async with sim_ctx() as (sim, ctx, events):
        started = await run_wf(ctx, Serve(recipe, B, ServeOptions(detach=True)))
        assert started.ok, started.message
        await sim.clock.sleep(120)  # let the load eat memory
        result = await run_wf(ctx, Stop(recipe.name))
        assert result.ok, result.message
        steps = [e.step for e in events.of(StepStarted) if e.step.startswith("stop rank")]
        assert steps[-1] == "stop rank 0" and sorted(steps) == [f"stop rank {i}"
                                                                for i in range(4)]
        assert containers(sim) == set()
        for node in B_NODES:
            assert "MemAvailable" in result.detail["memory"][node]
        assert ctx.locks.list() == []


async def test_a_protected_lane_is_not_stopped(sim_ctx, fleet_config):
    recipe = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx() as (sim, ctx, _):
        assert (await run_wf(ctx, Serve(recipe, B, ServeOptions(detach=True)))).ok
        result = await run_wf(ctx, Stop(recipe.name))
        assert not result.ok and result.message.startswith("refused")
        assert "must NOT be stopped" in result.message
        assert len(containers(sim)) == 4
        assert ctx.journal.workflows()[-1].end_detail["refused"]


async def test_cluster_power_off_then_on_orders_the_shared_switch(sim_ctx):
    async with sim_ctx() as (sim, ctx, _):
        off = await run_wf(ctx, ClusterPower(B, False))
        assert off.ok, off.message
        assert all(sim.nodes[n].power == "off" for n in B_NODES)
        assert sim.ha.calls == [("turn_off", f"switch.{n}") for n in B_NODES]
        assert "kept on (shared)" in off.message  # sw6_mt also carries production
        assert sim.spec.entities["switch.sw6_mt"].state == "on"
        sim.ha.calls.clear()
        on = await run_wf(ctx, ClusterPower(B, True))
        assert on.ok, on.message
        assert sim.ha.calls == [("turn_on", f"switch.{n}") for n in B_NODES]  # sw6_mt was on
        assert all(sim.nodes[n].up for n in B_NODES)


async def test_cluster_power_on_turns_the_switch_on_first(sim_ctx):
    async with sim_ctx("switch-off") as (sim, ctx, _):
        result = await run_wf(ctx, ClusterPower(B, True))
        assert result.ok, result.message
        assert sim.ha.calls[0] == ("turn_on", "switch.sw6_mt")


async def test_cluster_power_off_skips_production_and_refuses_busy_nodes(sim_ctx, fleet_config):
    recipe = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx() as (sim, ctx, _):
        result = await run_wf(ctx, ClusterPower("8nodes-switch", False))
        assert result.ok, result.message
        assert "skipped (protected): dgx1, dgx2, dgx3, dgx4" in result.message
        assert all(sim.nodes[n].up for n in ("dgx1", "dgx2", "dgx3", "dgx4"))
        assert {e for _, e in sim.ha.calls} == {f"switch.{n}" for n in B_NODES}
        assert (await run_wf(ctx, ClusterPower(B, True))).ok
        assert (await run_wf(ctx, Serve(recipe, B, ServeOptions(detach=True)))).ok
        sim.ha.calls.clear()
        busy = await run_wf(ctx, ClusterPower(B, False))
        # the lane is protected: the refusal never says "stop it"
        assert not busy.ok, busy.message
        assert "must NOT be stopped until they say so -> leave dgx5, dgx6, dgx7, dgx8 on" \
            in busy.message
        assert "stop its lanes first" not in busy.message
        assert sim.ha.calls == []


async def test_production_node_is_never_cycled(sim_ctx):
    async with sim_ctx() as (sim, ctx, _):
        result = await run_wf(ctx, PowerCycle("dgx1"))
        assert not result.ok and "protected node" in result.message
        assert sim.ha.calls == []


async def test_recover_stops_at_the_first_ssh_answer(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        result = await run_wf(ctx, Recover("dgx7"))
        assert result.ok and result.detail["power_cycled"] is False
        assert [e.step for e in events.of(StepStarted)] == ["ssh retry 1"]
        assert sim.ha.calls == []


async def test_recover_retries_three_times_then_cycles_that_node_only(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        sim.set_power("dgx7", False)  # a hung node as SSH sees it: no answer
        await sim.settle()
        result = await run_wf(ctx, Recover("dgx7", 5))
        assert result.ok, result.message
        steps = [e.step for e in events.of(StepStarted)]
        assert steps[:3] == ["ssh retry 1", "ssh retry 2", "ssh retry 3"]
        assert steps[3:] == ["plug off", "wait off", "plug on", "liveness", "ssh", "re-check"]
        assert {e for _, e in sim.ha.calls} == {"switch.dgx7"}
        assert sim.nodes["dgx7"].up and result.detail["power_cycled"]


@pytest.mark.parametrize("fault", ["ha-500", "ha-hang", "unavailable", "401"])
async def test_ha_faults_leave_no_half_state(sim_ctx, fleet_config, fault, monkeypatch):
    cfg = replace(fleet_config, home_assistant=replace(fleet_config.home_assistant,
                                                       timeout_s=0.5))
    monkeypatch.setenv("SPARKTUI_HA_TOKEN", "a-real-token-never-sent-to-the-sim")
    async with sim_ctx(config=cfg) as (sim, ctx, _):
        if fault == "401":
            sim.ha.token = "rotated-after-we-read-it"  # the token was revoked
        elif fault == "unavailable":
            sim.inject("unavailable", "switch.dgx6")
        else:
            sim.inject(fault)
        result = await run_wf(ctx, PowerCycle("dgx6"))
        assert not result.ok
        expect = {"ha-500": "HTTP 500", "ha-hang": "no answer within 0.5 s",
                  "unavailable": "unavailable in Home Assistant",
                  "401": "401 Unauthorized"}[fault]
        assert expect in result.message
        assert "rotated" not in result.message and "a-real-token" not in result.message
        assert sim.ha.calls == []
        assert sim.nodes["dgx6"].up
        assert ctx.journal.unfinished() == []
        assert ctx.locks.list() == []
        sim.inject("ha-ok")


async def test_ha_failing_after_the_plug_went_off_leaves_it_unfinished(sim_ctx, fleet_config):
    cfg = replace(fleet_config, home_assistant=replace(fleet_config.home_assistant,
                                                       timeout_s=0.5))
    async with sim_ctx(config=cfg) as (sim, ctx, events):
        def on_event(e):  # HA dies right after the plug went off
            events(e)
            if isinstance(e, StepStarted) and e.step == "wait off":
                sim.inject("ha-500")

        ctx.emit = on_event
        result = await run_wf(ctx, PowerCycle("dgx6", 2))
        assert not result.ok and "UNFINISHED" in result.message
        assert "switch.dgx6 (dgx6) may be off" in result.message
        (rec,) = ctx.journal.unfinished()
        assert rec.done("plug off") and not rec.done("plug on")
        assert ctx.locks.list() == []
        assert sim.nodes["dgx6"].power == "off"


async def test_power_off_then_on_a_single_node(sim_ctx):
    async with sim_ctx() as (sim, ctx, _):
        assert (await run_wf(ctx, PowerSwitch("dgx8", False))).ok
        assert sim.nodes["dgx8"].power == "off"
        back = await run_wf(ctx, PowerSwitch("dgx8", True))
        assert back.ok and "dgx8 back" in back.message


async def test_cycling_a_node_that_runs_a_protected_lane_is_refused(sim_ctx, fleet_config):
    protected = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx() as (sim, ctx, _):
        assert (await run_wf(ctx, Serve(protected, B, ServeOptions(detach=True)))).ok
        result = await run_wf(ctx, PowerCycle("dgx6"))
        assert not result.ok
        assert "runs a rank of protected lane glm53-flash-eugr-2x" in result.message
        assert sim.ha.calls == []


async def test_cycling_a_busy_node_warns_what_it_kills(sim_ctx, fleet_config):
    other = load_recipe(fleet_config, "glm53-full-mxfp4-4x-dspark8")
    async with sim_ctx() as (_, ctx, events):
        assert (await run_wf(ctx, Serve(other, B, ServeOptions(detach=True)))).ok
        result = await run_wf(ctx, PowerCycle("dgx6", 1))
        assert result.ok, result.message
        (guards_event,) = [e for e in events.events if type(e).__name__ == "GuardsEvaluated"
                           and e.wf == result.wf]
        assert any("sparktui-glm53-full-mxfp4-4x-dspark8-r1" in w and "kills it" in w
                   for w in guards_event.warnings)


async def test_a_lock_taken_after_the_guards_ran_is_a_refusal(sim_ctx, monkeypatch):
    async with sim_ctx() as (sim, ctx, _):
        ctx.locks.acquire(["dgx6"], wf="other", workflow="serve", target="x", started_at=0.0)
        monkeypatch.setattr(ctx.locks, "list", lambda: [])  # unseen by the guards
        result = await run_wf(ctx, PowerCycle("dgx6"))
        assert not result.ok and "after the guards ran" in result.message
        assert sim.ha.calls == []
        monkeypatch.undo()
        assert [lk.wf for lk in ctx.locks.list()] == ["other"]


async def test_recover_without_home_assistant_still_retries_ssh(sim_ctx):
    async with sim_ctx() as (sim, ctx, _):
        ctx.power, ctx.power_error = None, "no Home Assistant token: $SPARKTUI_HA_TOKEN is unset"
        ok = await run_wf(ctx, Recover("dgx7"))
        assert ok.ok and not ok.detail["power_cycled"]
        sim.set_power("dgx7", False)
        await sim.settle()
        down = await run_wf(ctx, Recover("dgx7"))
        assert not down.ok
        assert "Home Assistant is not available: no Home Assistant token" in down.message
        assert ctx.journal.unfinished() == [] and ctx.locks.list() == []


async def test_cancelling_a_serve_during_readiness_detaches(sim_ctx, fleet_config):
    import asyncio

    recipe = load_recipe(fleet_config, "glm53-full-mxfp4-4x-dspark8")
    async with sim_ctx(speed=50.0) as (sim, ctx, events):
        reached = asyncio.Event()

        def on_event(e):
            events(e)
            if isinstance(e, StepStarted) and e.step == "readiness":
                reached.set()

        ctx.emit = on_event
        task = asyncio.create_task(run_wf(ctx, Serve(recipe, B, ServeOptions(poll_s=5.0))))
        await asyncio.wait_for(reached.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ctx.locks.list() == []
        (wf,) = ctx.journal.workflows()
        assert wf.finished and wf.message == "cancelled"
        assert len(containers(sim)) == 4  # the ranks keep booting: Ctrl-C detaches


async def test_a_node_dropping_mid_stop_fails_that_rank_only(sim_ctx, fleet_config):
    recipe = load_recipe(fleet_config, "glm53-full-mxfp4-4x-dspark8")
    async with sim_ctx() as (sim, ctx, _):
        assert (await run_wf(ctx, Serve(recipe, B, ServeOptions(detach=True)))).ok
        plan = await prepare(ctx, Stop(recipe.name))
        emit = ctx.emit

        def drop_dgx7(event):  # once the guards passed, before the first stop
            emit(event)
            if isinstance(event, GuardsEvaluated):
                sim.set_power("dgx7", False)  # its SSH sessions drop with it

        ctx.emit = drop_dgx7
        result = await execute(ctx, plan)
        assert not result.ok
        assert "stop rank 2 [dgx7]" in result.message
        assert containers(sim, ("dgx5", "dgx6", "dgx8")) == set()  # the others were stopped
        (wf,) = [w for w in ctx.journal.workflows() if w.workflow == "stop"]
        assert wf.finished and all(s.ok is not None for s in wf.steps)
        assert ctx.locks.list() == []


async def test_the_recheck_after_a_cycle_reports_a_bad_kernel(sim_ctx):
    async with sim_ctx("bad-kernel") as (_, ctx, _e):
        result = await run_wf(ctx, PowerCycle("dgx8", 1))
        assert result.ok
        assert "BUT dgx8 runs kernel 7.0.0-1019-nvidia, known bad" in result.message
        assert result.detail["problems"]
