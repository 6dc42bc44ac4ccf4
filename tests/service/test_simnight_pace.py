"""The service tests' stepping (simnight.advance_until) against what the
product waits for on real time: a node that hangs is seen when its held SSH
probe times out, after probe_timeout_s real seconds. Simulated time must not
outrun that by more than `PACE`, or a budget in simulated seconds spends
itself on the host's speed (test_sentinel_alone_raises_the_long_prompt_thrash_alert
saw its thrash alert 40 to 470 simulated s after the prompt as the pace went)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from sparktui.sim.clock import SimClock

from .simnight import PACE, advance_until


async def test_a_real_time_wait_costs_at_most_its_pace_in_simulated_seconds() -> None:
    clock = SimClock()
    n = SimpleNamespace(sim=SimpleNamespace(clock=clock))
    loop = asyncio.get_running_loop()
    probe = asyncio.create_task(asyncio.sleep(0.5))  # a held probe's real timeout
    began = loop.time()
    await advance_until(n, probe.done, step=2.0, max_sim_s=3600, pace=PACE)  # type: ignore[arg-type]
    real = loop.time() - began
    # the pace is a ceiling whatever the host: a slow one spends fewer simulated s
    assert clock.monotonic() <= PACE * real + 2.0, (clock.monotonic(), real)
