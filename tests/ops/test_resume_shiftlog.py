"""Issue 27, against the Home Assistant stand-in: after a cycle killed with its
plug off and its resume, the shift log did not state the node's off time (the
journal had both confirmations), and kept the original cycle under
"Unfinished — needs the operator" as in doubt because the resume then failed
(the node did not come back). Once its plugs are on again the old workflow is
ended; the shift log tells both workflows as they were."""

from __future__ import annotations

import re

from sparktui.ops.shiftlog import render
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power_resume import Resume

OFF_S = 30


def killed_while_off(sim, ctx, wf: str = "power-cycle-killed") -> str:  # type: ignore[no-untyped-def]
    """The journal and the world of a graceful cycle of dgx6 killed (kill -9)
    during its off wait: shut down, plug confirmed off."""
    j = ctx.journal
    j.append(wf, "begin", workflow="power-cycle", target="dgx6",
             detail={"off_seconds": OFF_S})
    for step, target in (("plug check", "switch.dgx6"), ("poweroff", "dgx6"),
                         ("wait dark", "dgx6")):
        j.append(wf, "intent", workflow="power-cycle", target=target, step=step)
        j.append(wf, "outcome", target=target, step=step, ok=True)
    j.append(wf, "intent", workflow="power-cycle", target="switch.dgx6", step="plug off")
    sim.ha.switch("switch.dgx6", False)
    j.append(wf, "outcome", target="switch.dgx6", step="plug off", ok=True,
             message="switch.dgx6 confirmed off")
    j.append(wf, "intent", workflow="power-cycle", target="dgx6", step="wait off")
    return wf


async def test_a_resume_whose_node_does_not_come_back_still_ends_the_cycle(sim_ctx):
    async with sim_ctx() as (sim, ctx, _events):
        # the real-HA run: a template switch wired to nothing, so the node, shut
        # down by the cycle, does not boot when its "plug" comes back on
        sim.spec.entities["switch.dgx6"].node = ""
        sim.set_power("dgx6", False)
        wf = killed_while_off(sim, ctx)
        result = await execute(ctx, await prepare(ctx, Resume(wf)))
        assert not result.ok and "liveness" in result.message, result.message
        assert sim.spec.entities["switch.dgx6"].state == "on"
        assert ctx.journal.unfinished() == []
        text = render(ctx.journal.entries())
        assert "Unfinished" not in text and "in doubt" not in text, text
        cycle = next(line for line in text.splitlines() if "power-cycle dgx6" in line)
        m = re.search(r"\(off (\d+)s → on at \d\d:\d\d by (resume-\S+)\)", cycle)
        assert m and int(m.group(1)) >= OFF_S and m.group(2) == result.wf, cycle
        resume = next(line for line in text.splitlines() if f"resume {wf}" in line)
        assert "**FAILED**" in resume and "switch.dgx6 read off at" in resume, resume
        assert f"(off {m.group(1)}s since" in resume and f"by {wf})" in resume, resume
        assert "liveness" in resume


async def test_a_resume_that_brings_the_node_back_tells_the_off_time(sim_ctx):
    async with sim_ctx() as (sim, ctx, _events):
        sim.set_power("dgx6", False)
        wf = killed_while_off(sim, ctx)
        result = await execute(ctx, await prepare(ctx, Resume(wf)))
        assert result.ok, result.message
        assert sim.nodes["dgx6"].up and ctx.journal.unfinished() == []
        text = render(ctx.journal.entries())
        assert "Unfinished" not in text
        resume = next(line for line in text.splitlines() if f"resume {wf}" in line)
        assert ": done, finished" in resume and "switched switch.dgx6 on at" in resume, resume


async def test_a_plug_that_stayed_on_is_reported_as_nothing_switched(sim_ctx):
    async with sim_ctx() as (sim, ctx, _events):
        j, wf = ctx.journal, "power-cycle-in-flight"
        j.append(wf, "begin", workflow="power-cycle", target="dgx6", detail={"off_seconds": 35})
        j.append(wf, "intent", workflow="power-cycle", target="switch.dgx6", step="plug off")
        result = await execute(ctx, await prepare(ctx, Resume(wf)))
        assert result.ok and "it was not left off" in result.message, result.message
        assert sim.ha.calls == []
        text = render(j.entries())
        resume = next(line for line in text.splitlines() if f"resume {wf}" in line)
        assert "switch.dgx6 read on at" in resume and "nothing switched" in resume, resume
        cycle = next(line for line in text.splitlines() if "power-cycle dgx6" in line)
        assert f"{result.wf} read it on at" in cycle and "it was never off" in cycle, cycle
        assert "Unfinished" not in text and " off " not in resume


async def test_a_plug_off_that_lands_late_is_read_again_and_turned_back_on(sim_ctx):
    """REFERENCE §8: a real plug follows the call by up to seconds. A resume run
    right after the kill read the plug on while the plug-off call was still in
    flight: it then went off, and nothing turned it back on."""
    import asyncio

    async with sim_ctx() as (sim, ctx, _events):
        j, wf = ctx.journal, "power-cycle-lagging"
        j.append(wf, "begin", workflow="power-cycle", target="dgx6", detail={"off_seconds": 5})
        j.append(wf, "intent", workflow="power-cycle", target="switch.dgx6", step="plug off")

        async def lands_late() -> None:
            await sim.clock.sleep(3.0)
            sim.ha.switch("switch.dgx6", False)

        late = asyncio.create_task(lands_late())
        result = await execute(ctx, await prepare(ctx, Resume(wf)))
        await late
        assert result.ok, result.message
        assert sim.spec.entities["switch.dgx6"].state == "on" and sim.nodes["dgx6"].up
        (resumed,) = [w for w in j.workflows() if w.workflow == "resume"]
        read = next(s for s in resumed.steps if s.step == "plug read")
        assert read.detail == {"state": "off"}
        assert [s.step for s in resumed.steps][:2] == ["plug read", "plug on"]
        text = render(j.entries())
        cycle = next(line for line in text.splitlines() if "power-cycle dgx6" in line)
        assert "nothing switched" not in cycle, cycle
        assert (f"switch.dgx6: its plug-off call was in flight when it stopped; {result.wf} "
                f"read it off at") in cycle and "(off at most " in cycle, cycle
