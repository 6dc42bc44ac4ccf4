"""Ctrl-C (or SIGTERM, which the CLI turns into the same cancellation) during
`power cluster on|off`: every plug a call was sent to is re-read and said,
with the exact command that finishes the job (the same `tell_plug` as the
single-node cycle); nothing is switched behind the operator's back."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.ops.events import StepProgressed, StepStarted
from sparktui.ops.workflows.cluster_power import ClusterPower
from sparktui.ops.workflows.execute import execute, prepare

B = "4nodes-switch-b"
B_NODES = ("dgx5", "dgx6", "dgx7", "dgx8")


async def _interrupt_at(events, ctx, workflow, step: str) -> None:
    """Cancel the workflow as ``step`` starts: from the event itself, so the
    workflow takes no further step first (a test that polled for the event
    every 10 ms saw, on a loaded host, a plug switched before its Ctrl-C)."""
    plan = await prepare(ctx, workflow)
    task: asyncio.Task[object] | None = None

    def on_event(event: object) -> None:
        if isinstance(event, StepStarted) and event.step == step and task is not None:
            task.cancel()

    events.hooks.append(on_event)
    task = asyncio.create_task(execute(ctx, plan))
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(30):
            await task
    assert any(isinstance(e, StepStarted) and e.step == step for e in events.events), \
        f"never reached {step!r}"


async def test_ctrl_c_while_the_cluster_boots_says_each_plug_and_the_command(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        assert (await execute(ctx, await prepare(ctx, ClusterPower(B, False, hard=True)))).ok
        sim.ha.calls.clear()
        await _interrupt_at(events, ctx, ClusterPower(B, True), "liveness")
        said = [e.message for e in events.of(StepProgressed) if e.step == "plug state"]
        # the shared switches first (already on: no call was needed), then each node's plug
        assert said == [f"switch.{n} reads on (re-read now) -> to finish: "
                        f"`sparktui power cluster on {B}`"
                        for n in ("sw6_mt", "sw7_fan", *B_NODES)]
        assert sim.ha.calls == [("turn_on", f"switch.{n}") for n in B_NODES]  # no extra call
        notes = [e.message for e in ctx.journal.entries() if e.kind == "note"]
        assert f"after the interruption: {said[0]}" in notes
        assert not ctx.journal.unfinished()  # nothing owed: the command says how to finish


async def test_ctrl_c_before_any_plug_says_so_and_the_command(sim_ctx):
    async with sim_ctx() as (sim, ctx, events):
        await _interrupt_at(events, ctx, ClusterPower(B, False), "wait dark")
        said = [e.message for e in events.of(StepProgressed) if e.step == "plug state"]
        assert said == [f"no plug was switched -> to finish: `sparktui power cluster off {B}`"]
        assert sim.ha.calls == []
