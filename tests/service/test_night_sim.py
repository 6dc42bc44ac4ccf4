"""The console's service against the simulator writes an incident bundle by
itself: the 22:45 long prompt kills the engine and hangs dgx6 and dgx7; the
bundle holds every rank's lines (the dark nodes' from what the console
followed), says what could not be collected, and names the fatal rank and
line the console's own alert named."""

from __future__ import annotations

import asyncio
import tarfile
from pathlib import Path

from sparktui.core.config import NotifyConfig
from sparktui.core.notify import NotifyPolicy
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.core.state import NodeState
from sparktui.service.events import AlertRaised, ServiceEvent
from sparktui.sim.testing import connect

from ..tui.simconsole import PACE, POLL_S, run_for, sim_console, until

LANE = "glm53-mxfp4-fp8-4x-r39-196k"
PHONE = "notify.mobile_app_pixel_8"  # the simulated Home Assistant's phone (sim/ha.py)
BOOT_STEP_S = 120.0
"""Steps through the lane's boot (nothing here looks at it)."""


async def start_lane(c, recipe: str) -> None:  # type: ignore[no-untyped-def]
    """All ranks at once, as `sparktui serve` would (the simulated clock stands
    still meanwhile)."""
    r = load_recipe(c.config, recipe)

    async def one(rank) -> None:  # type: ignore[no-untyped-def]
        async with connect(c.sim, rank.node) as conn:
            result = await conn.run(rank.command(3), timeout=30)
            assert result.exit_status == 0, result.stderr

    await asyncio.gather(*(one(rank) for rank in plan(c.config, r, r.cluster).ranks))


def members(path: Path) -> dict[str, str]:
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                for m in tar.getmembers()}


async def test_long_prompt_thrash_bundle_with_two_nodes_dark(tmp_path: Path) -> None:
    async with sim_console(tmp_path, "long-prompt") as c:
        events: list[ServiceEvent] = []
        night = c.service.night
        night.collect_timeout_s = 3.0
        night.policy = NotifyPolicy(NotifyConfig(service=PHONE, max_per_hour=12))
        await c.service.start(events.append)
        try:
            await until(c, lambda: c.service.snapshot().count(NodeState.ONLINE) == 8)
            await start_lane(c, LANE)
            await until(c, lambda: LANE in c.service.lanes()
                        and c.service.lanes()[LANE].phase == "serving", step=BOOT_STEP_S,
                        max_sim_s=4 * 3600, why=lambda: str(c.service.lanes().get(LANE)))
            assert night.bundles == []
            c.sim.run_prompt(LANE, 150_000)

            def both_dark() -> list:  # type: ignore[type-arg]
                return [b for b in night.bundles if {"dgx6", "dgx7"} <= set(b.incident.dark)]

            # a hung node's probe fails after probe_timeout_s real seconds: paced
            await until(c, lambda: both_dark(), pace=PACE,
                        why=lambda: str([(b.path.name, b.incident.dark) for b in night.bundles]))
            def thrashed() -> set[str]:
                return {f"sparktui THRASH {e.alert.subject}" for e in events
                        if isinstance(e, AlertRaised) and e.alert.level == "thrash"}

            await until(c, lambda: thrashed() and thrashed()
                        <= {body["title"] for _, body in c.sim.ha.notifications}, pace=PACE,
                        why=lambda: f"{thrashed()} {c.sim.ha.notifications}")
            await run_for(c, 5 * POLL_S)  # later polls re-raise the same incidents
            sent = list(c.sim.ha.notifications)
            token = c.sim.ha.token
            # the runbook's last step: plug-cycle the dark nodes; each thrash incident
            # ends, and its recovery message follows once it stayed over
            dark = sorted(t.split()[-1] for t in thrashed())
            for node in dark:
                c.sim.ha.switch(c.config.nodes[node].switch, False)
            await run_for(c, 40.0)
            for node in dark:
                c.sim.ha.switch(c.config.nodes[node].switch, True)

            def recovered() -> set[str]:
                return {str(body["title"]) for _, body in c.sim.ha.notifications
                        if str(body["title"]).startswith("sparktui RECOVERED THRASH ")}

            await until(c, lambda: recovered() >= {f"sparktui RECOVERED THRASH {n}"
                                                   for n in dark},
                        step=10.0, max_sim_s=3600, pace=PACE,
                        why=lambda: f"{recovered()} {[e for e in events[-5:]]}")
            after = [str(body["title"]) for _, body in c.sim.ha.notifications]
        finally:
            await c.service.stop()
    bundle = both_dark()[0]
    assert bundle.path.parent == c.config.state_dir() / "bundles"
    assert bundle.path.name.endswith(f"-{LANE}.tar.gz")
    fatal = next(e.alert for e in events if isinstance(e, AlertRaised)
                 and e.alert.key == f"fatal:{LANE}")
    parts = members(bundle.path)
    summary = parts["SUMMARY.md"]
    inc = bundle.incident
    assert inc.failure is not None
    # the same rank and line the console's alert named
    assert fatal.evidence[0].startswith(f"rank {inc.failure.rank} ")
    assert inc.failure.line in fatal.evidence[0]
    assert f"The lane failed on **rank {inc.failure.rank}**" in summary
    assert inc.failure.line in summary
    for node in ("dgx6", "dgx7"):
        assert f"rank {'1' if node == 'dgx6' else '2'} of {LANE} on {node}: its log could not " \
               f"be read" in summary
        assert f"kernel/{node}.log" in parts
        assert f"`sparktui recover {node}`" in summary
        held = parts[f"ranks/{LANE}-r{1 if node == 'dgx6' else 2}-{node}.log"]
        assert held.count("\n") > 5  # what the console followed before it went dark
        assert parts[f"snapshots/{node}.jsonl"].strip()
    assert parts[f"ranks/{LANE}-r0-dgx5.log"].count("\n") > 5
    assert "thrash" in parts["alerts.jsonl"] and "## Timeline" in summary
    for name in ("plan.json", "hashes.txt", "commands.sh", "journal.jsonl", "kernel/dgx5.log"):
        assert name in parts

    # one alert and one recovery message per thrash incident
    for node in dark:
        assert after.count(f"sparktui THRASH {node}") == 1, after
        assert after.count(f"sparktui RECOVERED THRASH {node}") == 1, after
    # phone alerts: one per incident per node/lane, with the next step, no token
    titles = [body["title"] for _, body in sent]
    assert all(service == PHONE for service, _ in sent)
    assert len(titles) == len(set(titles)), titles
    assert f"sparktui FATAL {LANE}" in titles
    for _, body in sent:  # a recovery message has no next step
        assert ("Next: " in str(body["message"]) or "RECOVERED" in str(body["title"])) \
            and token not in str(body)
    for _, b in sent:
        if str(b["title"]).startswith("sparktui THRASH "):
            node = str(b["title"]).split()[-1]
            text = str(b["message"])
            assert text.startswith(f"{node}: ") and ("plug" in text or "SSH" in text), text
    # the console is told which alerts reached the phone
    marked = {e.alert.key for e in events if isinstance(e, AlertRaised) and e.alert.notified}
    assert {f"thrash:{t.split()[-1]}" for t in titles if "THRASH" in t} | {f"fatal:{LANE}"} \
        <= marked
