"""One fresh observation of the world for a plan (the only I/O a plan needs).

`observe(ctx, needs)` probes the nodes a workflow reads in one round and,
beside it, reads the Home Assistant switches and the SSH host keys; then tries
the ports on the nodes that answered; the run locks and the journal are read
from the state dir. The result is an `OpsState`, from which every plan is a
pure function.
"""

from __future__ import annotations

import asyncio
import time

from sparktui.adapters.homeassistant import HomeAssistantError
from sparktui.core.state import ClusterSnapshot
from sparktui.ops.context import OpsContext
from sparktui.ops.journal import clock_of
from sparktui.ops.plan import Needs, OpsState
from sparktui.ops.runlocks import owner_alive


async def _switches(ctx: OpsContext, entities: tuple[str, ...]) -> dict[str, str | None]:
    power = ctx.power

    async def one(entity: str) -> str | None:
        if power is None:
            return None
        try:
            return (await power.state(entity)).state
        except HomeAssistantError:
            return None

    states = await asyncio.gather(*(one(e) for e in entities))
    return dict(zip(entities, states, strict=True))


async def observe(ctx: OpsContext, needs: Needs) -> OpsState:
    async def snapshot() -> ClusterSnapshot:
        if not needs.nodes:
            return ClusterSnapshot(ctx.clock.time(), ())
        return await ctx.snapshot(list(needs.nodes))

    async def fingerprints() -> dict[str, str]:
        if not needs.fingerprints or ctx.fingerprints is None:
            return {}
        return await ctx.fingerprints(list(needs.fingerprints))

    snap, switches, fps = await asyncio.gather(snapshot(), _switches(ctx, needs.switches),
                                               fingerprints())
    ports: dict[tuple[str, int], bool] = {}
    check = ctx.port_open
    if check is not None:
        wanted = [(n, p) for n, p in needs.ports if (s := snap.get(n)) is not None and s.online]
        answers = await asyncio.gather(*(check(n, p) for n, p in wanted))
        ports = dict(zip(wanted, answers, strict=True))
    locks = tuple(ctx.locks.list())
    return OpsState(
        config=ctx.config, snapshot=snap, switch_states=switches,
        power_error=None if ctx.power is not None else (ctx.power_error or "not configured"),
        locks=locks, owner_alive={lock.node: owner_alive(lock) for lock in locks},
        lock_ages={lock.node: ctx.locks.age(lock.node, time.time()) for lock in locks},
        fingerprints=fps, ports=ports, unfinished=tuple(ctx.journal.unfinished()),
        clock=clock_of(ctx.clock))
