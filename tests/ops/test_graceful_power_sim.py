"""Graceful cluster power-off (issue 15): nodes that answer are shut down with
``systemctl poweroff`` and cut only once dark (0 unclean power losses in the
simulator); ``--hard`` cuts at once; a starved node is hard-cut and the plan
says why."""

from __future__ import annotations

from sparktui.core.state import ClusterSnapshot, NodeSnapshot, NodeState, ProbeResult
from sparktui.ops.events import StepStarted
from sparktui.ops.plan import OpsState
from sparktui.ops.workflows.cluster_power import ClusterPower
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power import POWEROFF, PowerSwitch

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
        assert [s.step for s in plan.steps] == ["poweroff", "wait dark", "plug off"]
        result = await execute(ctx, plan)
        assert result.ok and "shut down first" in result.message, result.message
        assert sim.nodes["dgx6"].power == "off" and sim.nodes["dgx6"].unclean_losses == 0
        hard = await run_wf(ctx, PowerSwitch("dgx7", False, hard=True))
        assert hard.ok and "hard cut: --hard" in hard.message
        assert sim.nodes["dgx7"].unclean_losses == 1
        assert [e.target for e in events.of(StepStarted) if e.step == "poweroff"] == ["dgx6"]
