"""Issue 27: a resume reads each plug before it claims anything. Killed with the
plug-off request in flight, `power resume` printed "21.8 s off" without reading
the plug, which had stayed on."""

from __future__ import annotations

from sparktui.ops.events import StepFinished, StepStarted
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power_resume import Resume


def killed_mid_plug_off(ctx, wf: str = "power-cycle-killed") -> str:
    """The journal of a cycle killed while its plug-off call was in flight."""
    j = ctx.journal
    j.append(wf, "begin", workflow="power-cycle", target="dgx6", detail={"off_seconds": 35})
    j.append(wf, "intent", workflow="power-cycle", target="switch.dgx6", step="plug off",
             action="POST turn_off")
    return wf


async def test_a_plug_that_stayed_on_is_read_and_no_off_time_is_claimed(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        wf = killed_mid_plug_off(ctx)
        assert sim.spec.entities["switch.dgx6"].state == "on"
        plan = await prepare(ctx, Resume(wf))
        assert [s.step for s in plan.steps][:2] == ["plug read", "wait off"]
        result = await execute(ctx, plan)
        assert result.ok, result.message
        started = [e.step for e in events.of(StepStarted)]
        assert started[0] == "plug read" and "wait off" not in started
        said = [e.message for e in events.of(StepFinished) if e.step == "plug read"]
        assert said == ["switch.dgx6 reads on: it was not left off (no off time is claimed)"]
        assert not any(" s off" in e.message for e in events.of(StepFinished))
        assert sim.ha.calls == [] and sim.nodes["dgx6"].up


async def test_a_plug_that_went_off_waits_the_rest_and_says_more(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        wf = killed_mid_plug_off(ctx)
        sim.ha.switch("switch.dgx6", False)
        result = await execute(ctx, await prepare(ctx, Resume(wf)))
        assert result.ok, result.message
        waited = [e.message for e in events.of(StepFinished) if e.step == "wait off"]
        assert len(waited) == 1 and waited[0].endswith(" s more off")
        assert sim.nodes["dgx6"].up


async def test_an_unreadable_plug_ends_the_resume_before_anything(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        wf = killed_mid_plug_off(ctx)
        plan = await prepare(ctx, Resume(wf))
        sim.inject("ha-500")
        result = await execute(ctx, plan)
        assert not result.ok and "plug read" in result.message, result.message
        assert [e.step for e in events.of(StepStarted)] == ["plug read"]
        assert ctx.journal.unfinished()[0].wf == wf


async def test_killed_during_wait_dark_resume_cycles_the_dark_node(sim_ctx):
    """kill -9 during "wait dark" left the node dark with its plug on, and resume
    offered only --close."""
    from sparktui.ops.resume import offers

    async with sim_ctx() as (sim, ctx, _events):
        j, wf = ctx.journal, "power-cycle-dark"
        j.append(wf, "begin", workflow="power-cycle", target="dgx6", detail={"off_seconds": 5})
        for step, target in (("plug check", "switch.dgx6"), ("poweroff", "dgx6")):
            j.append(wf, "intent", workflow="power-cycle", target=target, step=step)
            j.append(wf, "outcome", target=target, step=step, ok=True)
        j.append(wf, "intent", workflow="power-cycle", target="dgx6", step="wait dark")
        (offer,) = offers(j, ctx)
        assert offer.action and "told to shut down" in offer.action
        plan = await prepare(ctx, Resume(wf))
        assert plan.allowed, plan.to_json()
        assert [s.step for s in plan.steps][:4] == ["plug read", "plug off", "wait off",
                                                   "plug on"]
        result = await execute(ctx, plan)
        assert result.ok, result.message
        assert sim.ha.calls == [("turn_off", "switch.dgx6"), ("turn_on", "switch.dgx6")]
        assert sim.nodes["dgx6"].up and not ctx.journal.unfinished()
