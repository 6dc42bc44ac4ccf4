"""Power workflows end to end against the simulator: real SSH, real HTTP to its
Home Assistant, the plug state confirmed by re-reading it."""

from __future__ import annotations

from sparktui.ops.events import StepStarted, WorkflowFinished
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power import PowerCycle


async def run_wf(ctx, workflow):
    """The one route: plan from a fresh observation, then run that plan."""
    return await execute(ctx, await prepare(ctx, workflow))


async def test_power_cycle_dgx6_off_wait_on_back(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        result = await run_wf(ctx, PowerCycle("dgx6"))
        assert result.ok, result.message
        steps = [e.step for e in events.of(StepStarted)]
        assert steps == ["plug check", "poweroff", "wait dark", "plug off", "wait off",
                         "plug on", "liveness", "ssh", "re-check"]
        assert sim.ha.calls == [("turn_off", "switch.dgx6"), ("turn_on", "switch.dgx6")]
        assert sim.nodes["dgx6"].up and sim.nodes["dgx6"].unclean_losses == 0
        assert "kernel 6.17.0-1031" in result.message
        assert not ctx.locks.list()
        assert not ctx.journal.unfinished()
        assert isinstance(events.events[-1], WorkflowFinished)
