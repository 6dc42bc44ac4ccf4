"""The console's service predicts Boot D's OOM by itself (a lane it discovers,
started outside the console): an alert naming the node, the shard and the next
step, raised before any node thrashes; and one phone message for the lane
(however many ranks are predicted) reaches the simulated Home Assistant."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktui.core.config import NotifyConfig
from sparktui.core.notify import NotifyPolicy
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.service.events import AlertRaised, ServiceEvent
from sparktui.sim.testing import connect

from ..tui.simconsole import POLL_S, run_for, sim_console, until

LANE = "dsv41-flash-r37-4x-eager"
PHONE = "notify.mobile_app_pixel_8"  # the simulated Home Assistant's phone (sim/ha.py)


async def test_the_console_predicts_boot_d_before_any_node_thrashes(tmp_path: Path) -> None:
    async with sim_console(tmp_path, "boot-d-oom") as c:
        events: list[ServiceEvent] = []
        c.service.night.policy = NotifyPolicy(NotifyConfig(service=PHONE,
                                                           events=("predicted-oom",)))
        await c.service.start(events.append)
        try:
            r = load_recipe(c.config, LANE)

            async def one(rank) -> None:  # type: ignore[no-untyped-def]
                async with connect(c.sim, rank.node) as conn:
                    result = await conn.run(rank.command(3), timeout=30)
                    assert result.exit_status == 0, result.stderr

            await asyncio.gather(*(one(rank) for rank in plan(c.config, r, r.cluster).ranks))

            def predicted() -> list[AlertRaised]:
                return [e for e in events if isinstance(e, AlertRaised)
                        and e.alert.key.startswith("predicted oom:")]

            await until(c, predicted, max_sim_s=4 * 3600, why=lambda: "no prediction")
            assert not any(n.thrash_onset for n in c.sim.nodes.values())
            alert = predicted()[0].alert
            assert alert.subject in ("dgx1", "dgx2", "dgx3", "dgx4")
            # Boot D is ~5 GiB short at the very end of the load: "at shard 95/96" or
            # "at KV allocation" depending on how fresh the last reading is
            assert f"{alert.subject} runs out at " in alert.evidence[0]
            assert f"sparktui stop {LANE}" in alert.next_step
            assert alert.key in {a.key for a in c.service.alerts()}  # marked once phoned
            await until(c, lambda: c.sim.ha.notifications, why=lambda: "no phone message")
            # the other ranks' predictions come in: no new message
            await run_for(c, 10 * POLL_S)
            sent, token = list(c.sim.ha.notifications), c.sim.ha.token
        finally:
            await c.service.stop()
    assert [(s, b["title"]) for s, b in sent] == [(PHONE, f"sparktui PREDICTED-OOM {LANE}")]
    text = str(sent[0][1]["message"])
    assert text.startswith(f"{LANE}: dgx") and " runs out at " in text
    assert "Next: stop" in text and f"sparktui stop {LANE}" in text
    assert token not in str(sent)
