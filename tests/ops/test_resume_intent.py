"""A resume completes what the operator asked for, and its offer says what it
will do in each case before any plug is read.

- A power cycle killed with its plug-off in doubt after the node was told to
  shut down: the plug may read off (turn it back on) or on (the node is dark
  with its plug on: cut it and cycle it, power_resume.cut_and_cycle). The
  offer said only "if it reads off: ... turn back on".
- A cluster power-off killed after its plugs went off: resume turned them
  back on and waited for the nodes, the opposite of what the operator asked.
  It now leaves them off, cuts a plug whose cut was in flight and reads on,
  and says what the power-off never reached with the command that finishes
  it (its guards run again: a shared switch, a lane started since)."""

from __future__ import annotations

from sparktui.ops.resume import offers
from sparktui.ops.shiftlog import render
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power_resume import Resume

B = "4nodes-switch-b"


def cycle_killed_at_plug_off(ctx, wf: str = "power-cycle-halted") -> str:  # type: ignore[no-untyped-def]
    """dgx6 shut down (poweroff, wait dark done), its plug-off call in flight."""
    j = ctx.journal
    j.append(wf, "begin", workflow="power-cycle", target="dgx6", detail={"off_seconds": 5})
    for step, target in (("plug check", "switch.dgx6"), ("poweroff", "dgx6"),
                         ("wait dark", "dgx6")):
        j.append(wf, "intent", workflow="power-cycle", target=target, step=step)
        j.append(wf, "outcome", target=target, step=step, ok=True)
    j.append(wf, "intent", workflow="power-cycle", target="switch.dgx6", step="plug off")
    return wf


async def test_the_offer_says_what_resume_does_when_the_plug_reads_on_or_off(sim_ctx):
    async with sim_ctx() as (sim, ctx, _events):
        wf = cycle_killed_at_plug_off(ctx)
        j = ctx.journal
        j.append("in-flight", "begin", workflow="power-cycle", target="dgx7",
                 detail={"off_seconds": 5})  # no shutdown: a plug reading on was never off
        j.append("in-flight", "intent", workflow="power-cycle", target="switch.dgx7",
                 step="plug off")
        halted, flight = offers(j, ctx)
        assert "read switch.dgx6: if it reads off, " in halted.action, halted.action
        assert "turn it back on; if it reads on, dgx6 was told to shut down and only a plug " \
               "cycle boots it: cut it, wait 5 s, turn it back on" in halted.action, halted.action
        assert halted.action.endswith(f"then wait for dgx6 and re-check (`sparktui power "
                                      f"resume {wf}`)"), halted.action
        assert "if it reads on, it was never off: nothing to switch" in flight.action, \
            flight.action
        # and it does what it said: the plug reads on, the node halted
        assert sim.spec.entities["switch.dgx6"].state == "on"
        result = await execute(ctx, await prepare(ctx, Resume(wf)))
        assert result.ok, result.message
        assert sim.ha.calls == [("turn_off", "switch.dgx6"), ("turn_on", "switch.dgx6")]
        assert sim.nodes["dgx6"].up


def cluster_off_killed(ctx, wf: str = "cluster-power-off-killed") -> str:  # type: ignore[no-untyped-def]
    """A hard `power cluster off B` killed at dgx7's plug: dgx5 and dgx6 cut and
    confirmed off, dgx7's call in flight, dgx8 and the fan switch never reached."""
    j = ctx.journal
    j.append(wf, "begin", workflow="cluster-power-off", target=B,
             detail={"nodes": ["dgx5", "dgx6", "dgx7", "dgx8"], "switches": ["switch.sw7_fan"],
                     "hard_cut": dict.fromkeys(["dgx5", "dgx6", "dgx7", "dgx8"], "--hard")})
    for node in ("dgx5", "dgx6"):
        j.append(wf, "intent", workflow="cluster-power-off", target=f"switch.{node}",
                 step="plug off")
        j.append(wf, "outcome", target=f"switch.{node}", step="plug off", ok=True,
                 message=f"switch.{node} confirmed off")
    j.append(wf, "intent", workflow="cluster-power-off", target="switch.dgx7", step="plug off")
    return wf


async def test_a_killed_cluster_power_off_is_completed_off(sim_ctx):
    async with sim_ctx() as (sim, ctx, _events):
        wf = cluster_off_killed(ctx)
        for node in ("dgx5", "dgx6"):
            sim.ha.switch(f"switch.{node}", False)
        sim.ha.calls.clear()
        (offer,) = offers(ctx.journal, ctx)
        assert ("read switch.dgx5: if it reads off, leave it off (cluster-power-off meant it); "
                "if it reads on, cluster-power-off was cutting it: cut it") in offer.action, \
            offer.action
        assert "turn" not in offer.action and "wait for" not in offer.action, offer.action
        assert (f"never reached: dgx8, switch.sw7_fan -> to finish the power-off: `sparktui "
                f"power cluster off {B}`") in offer.action, offer.action
        plan = await prepare(ctx, Resume(wf))
        assert plan.allowed, plan.to_json()
        steps = [s.step for s in plan.steps]
        assert "plug on" not in steps and "liveness" not in steps, steps
        result = await execute(ctx, plan)
        assert result.ok, result.message
        # dgx5 and dgx6 stay off; dgx7's cut, which never landed, is made
        assert sim.ha.calls == [("turn_off", "switch.dgx7")], sim.ha.calls
        states = {n: sim.spec.entities[f"switch.{n}"].state for n in ("dgx5", "dgx6", "dgx7")}
        assert states == dict.fromkeys(states, "off"), states
        assert sim.spec.entities["switch.dgx8"].state == "on"  # the command's to finish
        assert "never reached: dgx8" in result.message, result.message
        # journaled before and after: the resume's intents and outcomes, then the old end
        assert ctx.journal.unfinished() == []
        (old,) = [w for w in ctx.journal.workflows() if w.wf == wf]
        assert old.message.startswith(f"completed by {result.wf}: every plug it turned off "
                                      f"is off, as it meant; never reached: dgx8"), old.message
        (resumed,) = [w for w in ctx.journal.workflows() if w.workflow == "resume"]
        assert [(s.step, s.target, s.ok) for s in resumed.steps] == [
            ("plug read", "switch.dgx5", True), ("plug read", "switch.dgx6", True),
            ("plug read", "switch.dgx7", True), ("plug off", "switch.dgx7", True)]
        assert "Unfinished" not in render(ctx.journal.entries())


async def test_a_killed_node_power_off_stays_off(sim_ctx):
    async with sim_ctx() as (sim, ctx, _events):
        j, wf = ctx.journal, "power-off-killed"
        j.append(wf, "begin", workflow="power-off", target="dgx6")
        j.append(wf, "intent", workflow="power-off", target="switch.dgx6", step="plug off")
        sim.ha.switch("switch.dgx6", False)
        j.append(wf, "outcome", target="switch.dgx6", step="plug off", ok=True)
        sim.ha.calls.clear()
        result = await execute(ctx, await prepare(ctx, Resume(wf)))
        assert result.ok, result.message
        assert sim.ha.calls == [] and sim.spec.entities["switch.dgx6"].state == "off"
        assert "left off, as power-off meant" in result.message, result.message
