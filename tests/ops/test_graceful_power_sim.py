"""Graceful cluster power-off (issue 15): nodes that answer are shut down with
``systemctl poweroff`` and cut only once dark (0 unclean power losses in the
simulator); ``--hard`` cuts at once; a starved node is hard-cut and the plan
says why."""

from __future__ import annotations

from dataclasses import replace

from sparktui.core.recipe_load import load_recipe
from sparktui.core.state import ClusterSnapshot, NodeSnapshot, NodeState, ProbeResult
from sparktui.ops.events import StepStarted
from sparktui.ops.plan import OpsState
from sparktui.ops.workflows.cluster_power import ClusterPower
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power import POWEROFF, PowerCycle, PowerSwitch
from sparktui.ops.workflows.recover import Recover
from sparktui.ops.workflows.serve import Serve, ServeOptions

B = "4nodes-switch-b"
B_NODES = ("dgx5", "dgx6", "dgx7", "dgx8")


async def run_wf(ctx, workflow):
    return await execute(ctx, await prepare(ctx, workflow))


async def test_four_healthy_nodes_shut_down_before_their_plugs(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        result = await run_wf(ctx, ClusterPower(B, False))
        assert result.ok, result.message
        assert "shut down first: dgx5, dgx6, dgx7, dgx8" in result.message
        assert "hard cut" not in result.message
        assert all(sim.nodes[n].power == "off" for n in B_NODES)
        assert sum(sim.nodes[n].unclean_losses for n in B_NODES) == 0
        steps = [(e.step, e.target) for e in events.of(StepStarted)]
        last_poweroff = max(i for i, (s, _) in enumerate(steps) if s in ("poweroff", "wait dark"))
        first_cut = min(i for i, (s, _) in enumerate(steps) if s == "plug off")
        assert last_poweroff < first_cut
        assert sim.ha.calls == [("turn_off", f"switch.{n}") for n in B_NODES]
        assert sim.spec.entities["switch.sw6_mt"].state == "on"  # shared: kept on, as before
        on = await run_wf(ctx, ClusterPower(B, True))
        assert on.ok, on.message
        assert all(sim.nodes[n].up for n in B_NODES)


async def test_hard_cuts_at_once(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        result = await run_wf(ctx, ClusterPower(B, False, hard=True))
        assert result.ok, result.message
        assert "hard cut: dgx5 (--hard)" in result.message
        assert not [e for e in events.of(StepStarted) if e.step == "poweroff"]
        assert sum(sim.nodes[n].unclean_losses for n in B_NODES) == 4


def test_a_starved_node_is_hard_cut_with_the_reason_in_the_plan(fleet_config):
    snaps = tuple(NodeSnapshot(n, NodeState.STARVED if n == "dgx6" else NodeState.ONLINE,
                               1.0, None if n == "dgx6" else ProbeResult(), liveness=True)
                  for n in fleet_config.nodes)
    plan = ClusterPower(B, False).plan(OpsState(fleet_config, ClusterSnapshot(1.0, snaps)))
    assert plan.allowed
    actions = {(s.step, s.target): s.action for s in plan.steps}
    assert ("poweroff", "dgx6") not in actions and ("wait dark", "dgx6") not in actions
    assert "hard cut: starved (ping answers, SSH does not)" in actions[("plug off",
                                                                      "switch.dgx6")]
    for n in ("dgx5", "dgx7", "dgx8"):
        assert actions[("poweroff", n)] == POWEROFF
        assert "hard cut" not in actions[("plug off", f"switch.{n}")]
    assert plan.detail["hard_cut"] == {"dgx6": "starved (ping answers, SSH does not): it "
                                                "cannot shut itself down"}


async def test_power_off_one_node_is_graceful_unless_hard(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        plan = await prepare(ctx, PowerSwitch("dgx6", False))
        assert [s.step for s in plan.steps] == ["plug check", "poweroff", "wait dark",
                                                "plug off"]
        result = await execute(ctx, plan)
        assert result.ok and "shut down first" in result.message, result.message
        assert sim.nodes["dgx6"].power == "off" and sim.nodes["dgx6"].unclean_losses == 0
        hard = await run_wf(ctx, PowerSwitch("dgx7", False, hard=True))
        assert hard.ok and "hard cut: --hard" in hard.message
        assert sim.nodes["dgx7"].unclean_losses == 1
        assert [e.target for e in events.of(StepStarted) if e.step == "poweroff"] == ["dgx6"]


def unprotected(config):
    return replace(config, guards=replace(config.guards, protected_lanes=()))


async def test_power_cycle_of_a_responsive_node_shuts_it_down_first(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        plan = await prepare(ctx, PowerCycle("dgx6", 2))
        assert [s.step for s in plan.steps] == ["plug check", "poweroff", "wait dark",
                                                "plug off", "wait off", "plug on", "liveness",
                                                "ssh", "re-check"]
        result = await execute(ctx, plan)
        assert result.ok and "(shut down first)" in result.message, result.message
        assert sim.nodes["dgx6"].up and sim.nodes["dgx6"].unclean_losses == 0
        steps = [e.step for e in events.of(StepStarted)]
        assert steps.index("wait dark") < steps.index("plug off")


async def test_power_cycle_hard_skips_the_shutdown(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        plan = await prepare(ctx, PowerCycle("dgx7", 2, hard=True))
        assert [s.step for s in plan.steps][:2] == ["plug off", "wait off"]
        assert "(hard cut: --hard)" in plan.steps[0].action
        result = await execute(ctx, plan)
        assert result.ok and "hard cut: --hard" in result.message, result.message
        assert not [e for e in events.of(StepStarted) if e.step == "poweroff"]
        assert sim.nodes["dgx7"].up and sim.nodes["dgx7"].unclean_losses == 1


def test_power_cycle_of_a_starved_node_is_a_hard_cut_with_the_reason(fleet_config):
    snaps = (NodeSnapshot("dgx6", NodeState.STARVED, 1.0, None, liveness=True),)
    plan = PowerCycle("dgx6").plan(OpsState(fleet_config, ClusterSnapshot(1.0, snaps)))
    assert plan.allowed
    assert plan.steps[0].step == "plug off"
    assert "hard cut: starved (ping answers, SSH does not)" in plan.steps[0].action
    assert plan.detail["hard_cut"].startswith("starved")
    assert plan.to_json()["steps"][0]["action"] == plan.steps[0].action


def test_recover_says_its_cycle_is_a_hard_cut(fleet_config):
    snaps = (NodeSnapshot("dgx6", NodeState.ONLINE, 1.0, ProbeResult()),)
    plan = Recover("dgx6").plan(OpsState(fleet_config, ClusterSnapshot(1.0, snaps)))
    cut = next(s for s in plan.steps if s.step == "plug off")
    assert "hard cut: reached only when no SSH retry answered" in cut.action
    assert not [s for s in plan.steps if s.step == "poweroff"]


async def serve_b(ctx, config):
    r = load_recipe(config, "glm53-flash-eugr-2x")
    result = await run_wf(ctx, Serve(r, B, ServeOptions(detach=True)))
    assert result.ok, result.message
    return r.name


async def test_power_off_a_node_stops_its_lane_everywhere_first(sim_ctx, fleet_config):
    cfg = unprotected(fleet_config)
    async with sim_ctx(config=cfg) as (sim, ctx, _events):
        lane = await serve_b(ctx, cfg)
        plan = await prepare(ctx, PowerSwitch("dgx6", False))
        assert plan.allowed, plan.to_json()
        steps = [(s.step, s.target) for s in plan.steps]
        stops = [i for i, (s, _) in enumerate(steps) if s.startswith("stop rank")]
        assert {t for s, t in steps if s.startswith("stop rank")} == set(B_NODES)
        assert max(stops) < steps.index(("poweroff", "dgx6"))
        # memory is checked on the nodes that stay on, not on the one going off
        assert {t for s, t in steps if s == "memory freed"} == {"dgx5", "dgx7", "dgx8"}
        assert plan.detail["stops"] == [lane]
        result = await execute(ctx, plan)
        assert result.ok and f"stopped first: {lane}" in result.message, result.message
        assert sim.nodes["dgx6"].power == "off" and sim.nodes["dgx6"].unclean_losses == 0
        assert not any(sim.nodes[n].docker.containers for n in B_NODES)
        assert all(sim.nodes[n].up for n in ("dgx5", "dgx7", "dgx8"))


async def test_cluster_power_off_stops_the_lanes_then_shuts_down(sim_ctx, fleet_config):
    cfg = unprotected(fleet_config)
    async with sim_ctx(config=cfg) as (sim, ctx, events):
        lane = await serve_b(ctx, cfg)
        result = await run_wf(ctx, ClusterPower(B, False))
        assert result.ok, result.message
        assert f"stopped first: {lane}" in result.message
        assert "shut down first: dgx5, dgx6, dgx7, dgx8" in result.message
        assert sum(sim.nodes[n].unclean_losses for n in B_NODES) == 0
        steps = [e.step for e in events.of(StepStarted)]
        last_stop = max(i for i, s in enumerate(steps) if s.startswith("stop rank"))
        assert last_stop < steps.index("poweroff")
        assert "memory freed" not in steps  # every node of the lane goes off


async def test_a_protected_lane_still_refuses_a_power_off(sim_ctx, fleet_config):
    async with sim_ctx() as (sim, ctx, _events):
        lane = await serve_b(ctx, fleet_config)
        plan = await prepare(ctx, PowerSwitch("dgx7", False))
        refused = [v for v in plan.report.refused if v.guard == "protected-lane"]
        assert [v.subject for v in refused] == [lane]
        assert "must NOT be stopped" in refused[0].message
        assert "leave dgx7 on" in refused[0].message
        assert refused[0].override is None
        result = await execute(ctx, plan)
        assert not result.ok and sim.ha.calls == []


async def test_a_cycle_never_shuts_down_a_node_whose_plug_does_not_answer(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        plan = await prepare(ctx, PowerCycle("dgx6", 2))
        sim.ha.fault = "500"
        result = await execute(ctx, plan)
        assert not result.ok and "plug check" in result.message, result.message
        assert not [e for e in events.of(StepStarted) if e.step == "poweroff"]
        assert sim.nodes["dgx6"].up and sim.nodes["dgx6"].unclean_losses == 0


async def test_cluster_off_with_ha_answering_502_shuts_no_node_down(sim_ctx):
    """Issue 27: HA failing, `power cluster off` shut four nodes down, then failed at
    `plug off`. Every plug is read afresh before any node is shut down."""
    async with sim_ctx() as (sim, ctx, events):
        plan = await prepare(ctx, ClusterPower(B, False))
        steps = [s.step for s in plan.steps]
        assert steps.index("plug check") < steps.index("poweroff")
        assert {s.target for s in plan.steps if s.step == "plug check"} == \
            {f"switch.{n}" for n in B_NODES}
        sim.inject("ha-502-echo")
        result = await execute(ctx, plan)
        assert not result.ok and "plug check" in result.message, result.message
        assert not [e for e in events.of(StepStarted) if e.step == "poweroff"]
        assert all(sim.nodes[n].up for n in B_NODES)
        assert sum(sim.nodes[n].unclean_losses for n in B_NODES) == 0 and sim.ha.calls == []


async def test_power_off_of_one_node_reads_its_plug_before_the_shutdown(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        plan = await prepare(ctx, PowerSwitch("dgx6", False))
        assert [s.step for s in plan.steps] == ["plug check", "poweroff", "wait dark",
                                                "plug off"]
        sim.inject("ha-500")
        result = await execute(ctx, plan)
        assert not result.ok and "plug check" in result.message, result.message
        assert not [e for e in events.of(StepStarted) if e.step == "poweroff"]
        assert sim.nodes["dgx6"].up and sim.nodes["dgx6"].unclean_losses == 0
