"""Ctrl-C (or SIGTERM, which the CLI turns into the same cancellation) during
a power cycle's off wait: the plug's state is re-read and said, with the exact
resume command; the plug is not switched behind the operator's back."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.ops.events import StepProgressed, StepStarted
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power import PowerCycle


async def test_ctrl_c_during_the_off_wait_says_what_the_plug_reads(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        plan = await prepare(ctx, PowerCycle("dgx7", 3600))
        task = asyncio.create_task(execute(ctx, plan))
        for _ in range(2000):
            if any(isinstance(e, StepStarted) and e.step == "wait off" for e in events.events):
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (record,) = ctx.journal.unfinished()
        said = [e.message for e in events.of(StepProgressed) if e.step == "plug state"]
        assert said == [f"switch.dgx7 reads off (re-read now): dgx7 may be left without power "
                        f"-> `sparktui power resume {record.wf}`"]
        assert sim.nodes["dgx7"].power == "off"
        assert sim.ha.calls == [("turn_off", "switch.dgx7")]
        notes = [e.message for e in ctx.journal.entries() if e.kind == "note"]
        assert f"after the interruption: {said[0]}" in notes
