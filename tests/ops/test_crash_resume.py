"""A `sparktui power cycle` process killed with SIGKILL between steps loses no
journal entry; the next start finds the workflow unfinished, offers it, and
completing it turns the plug back on. The node is simulated; the killed
process is a real `python -m sparktui` talking real HTTP and SSH."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from sparktui.ops.resume import close, offers
from sparktui.ops.runlocks import owner_alive
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power_resume import Resume


async def run_wf(ctx, workflow):
    """The one route: plan from a fresh observation, then run that plan."""
    return await execute(ctx, await prepare(ctx, workflow))


async def _start(config_path, *args: str) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_HA_TOKEN"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui.cli.main", "--config", str(config_path), "power",
        "cycle", "dgx6", "--yes", "--hard", *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)


async def _kill_after(proc, journal, kind: str, step: str) -> None:
    async with asyncio.timeout(30):
        while not any(e.kind == kind and e.step == step for e in journal.entries()):
            if proc.returncode is not None:
                _out, err = await proc.communicate()
                pytest.fail(f"process ended early: {err.decode()}")
            await asyncio.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert await proc.wait() == -signal.SIGKILL


@pytest.mark.parametrize("hang", [False, True], ids=["killed-while-off", "killed-mid-plug-off"])
async def test_killed_power_cycle_is_offered_and_completed(sim_ctx, fleet_config, hang):
    async with sim_ctx() as (sim, ctx, _events):
        if hang:
            sim.inject("ha-hang")  # the plug-off call never returns: the step is in doubt
        proc = await _start(fleet_config.path, "--off-seconds", "600")
        if hang:
            await _kill_after(proc, ctx.journal, "intent", "plug off")
            sim.inject("ha-ok")
        else:
            await _kill_after(proc, ctx.journal, "intent", "wait off")
            assert sim.nodes["dgx6"].power == "off"

        found = offers(ctx.journal, ctx)
        assert len(found) == 1
        offer = found[0]
        assert offer.record.workflow == "power-cycle"
        assert offer.plugs_off == ("switch.dgx6",)
        if hang:
            assert [s.step for s in offer.record.steps if s.ok is None] == ["plug off"]
        else:
            assert offer.record.done("plug off", "switch.dgx6")
        lock = ctx.locks.get("dgx6")
        assert lock is not None and lock.wf == offer.record.wf
        assert owner_alive(lock) is False

        result = await run_wf(ctx, Resume(offer.record.wf))
        assert result.ok, result.message
        assert sim.nodes["dgx6"].up
        assert ctx.journal.unfinished() == []
        assert ctx.locks.list() == []


async def test_killed_after_the_plug_came_back_offers_only_a_close(sim_ctx, fleet_config):
    async with sim_ctx() as (_sim, ctx, _events):
        proc = await _start(fleet_config.path, "--off-seconds", "1")
        await _kill_after(proc, ctx.journal, "outcome", "plug on")
        (offer,) = offers(ctx.journal, ctx)
        assert offer.action == "" and offer.plugs_off == ()
        assert close(ctx, offer.record, "checked by hand") == ["dgx6"]
        assert ctx.journal.unfinished() == []
