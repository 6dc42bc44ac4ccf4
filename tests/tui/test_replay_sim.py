"""Record and replay a night: the console's service records the 22:45 long
prompt against the simulator; `sparktui replay`'s app shows the recorded
alerts at the same moment of the night (within one poll), read-only, and the
seek keys move the replay clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.core.state import NodeState
from sparktui.service.events import AlertCleared, AlertRaised, ServiceEvent
from sparktui.service.recorded import read_recording
from sparktui.service.replay import ReplaySource
from sparktui.sim.testing import connect
from sparktui.tui.replay import ReplayApp

from .harness import wait_for
from .simconsole import PACE, POLL_S, run_for, sim_console, until

LANE = "glm53-mxfp4-fp8-4x-r39-196k"
BOOT_STEP_S = 600.0
"""Steps through the lane's boot (the replay starts shortly before the fatal line)."""
SPEED = 30.0
"""Replay seconds per real second: a 0.1 s tick is 3 s of the night."""


async def record_long_prompt(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run the incident with the console's service (recording on by default)."""
    async with sim_console(tmp_path, "long-prompt") as c:
        events: list[ServiceEvent] = []
        c.service.night.auto_bundle = False
        await c.service.start(events.append)
        try:
            await until(c, lambda: c.service.snapshot().count(NodeState.ONLINE) == 8)
            r = load_recipe(c.config, LANE)

            async def one(rank) -> None:  # type: ignore[no-untyped-def]
                async with connect(c.sim, rank.node) as conn:
                    assert (await conn.run(rank.command(3), timeout=30)).exit_status == 0

            await asyncio.gather(*(one(rank) for rank in plan(c.config, r, r.cluster).ranks))
            await until(c, lambda: LANE in c.service.lanes()
                        and c.service.lanes()[LANE].phase == "serving", step=BOOT_STEP_S,
                        max_sim_s=4 * 3600)
            c.sim.run_prompt(LANE, 150_000)
            # a hung node's probe fails after probe_timeout_s real seconds: paced;
            # the fatal line too (the replay below needs it; on a loaded host it
            # came after the thrash alerts' last poll, and the recording lacked it)
            def incident() -> bool:
                raised = [e.alert for e in events if isinstance(e, AlertRaised)]
                return ({"dgx6", "dgx7"} <= {a.subject for a in raised if a.level == "thrash"}
                        and f"fatal:{LANE}" in {a.key for a in raised})

            await until(c, incident, pace=PACE)
            await run_for(c, 3 * POLL_S)
        finally:
            await c.service.stop()
        (path,) = (c.config.state_dir() / "recordings").glob("night-*.jsonl.gz")
        return c.config, path


def live_raised_at(recorded, now: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Each alert active at ``now`` and when it was raised live (its first
    raise since it last cleared; a repeat of an active alert is no raise)."""
    active: dict[str, float] = {}
    for t, e in recorded:
        if t > now:
            break
        if isinstance(e, AlertRaised):
            active.setdefault(e.alert.key, t)
        elif isinstance(e, AlertCleared):
            active.pop(e.key, None)
    return active


def shown_raised_at(app) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {k: e.raised_at for k, e in app.alerts.active.items()}


async def test_a_recorded_incident_replays_at_the_same_moment(tmp_path: Path) -> None:
    config, path = await record_long_prompt(tmp_path)
    recorded = list(read_recording(path))
    kinds = {type(e).__name__ for _, e in recorded}
    assert {"NodeSampled", "LaneChanged", "LogLinesArrived", "AlertRaised"} <= kinds
    alerts = [(t, e.alert) for t, e in recorded if isinstance(e, AlertRaised)]
    t_fatal = next(t for t, a in alerts if a.key == f"fatal:{LANE}")
    # the first thrash alert on a node that stays hung (dgx6, dgx7: never cleared;
    # dgx5's pressure may raise one that clears again before the fatal line)
    t_thrash, thrash = next((t, a) for t, a in alerts
                            if a.level == "thrash" and a.subject in ("dgx6", "dgx7"))

    source = ReplaySource(config, recorded, speed=SPEED, start=t_fatal - 4 * POLL_S)
    app = ReplayApp(config, source)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert f"fatal:{LANE}" not in app.alerts.active
        await wait_for(pilot, lambda: f"fatal:{LANE}" in app.alerts.active, timeout=30)
        # shown at the moment it was raised live, within one poll
        assert t_fatal <= source.now <= t_fatal + POLL_S, (source.now - t_fatal)
        # every alert shown, played or reported at the start, at its live raise time
        assert shown_raised_at(app) == live_raised_at(recorded, source.now)
        assert "REPLAY" in str(app.title)

        await pilot.press("space")  # pause
        await pilot.pause(0.1)
        frozen = source.now
        await pilot.pause(0.4)
        assert source.paused and source.now == frozen and "PAUSED" in str(app.title)

        await pilot.press("full_stop")  # +1 min
        await pilot.pause(0.2)
        forward = min(frozen + 60, source.last)  # the recording may end within the minute
        assert source.now == forward
        await pilot.press("comma", "comma")  # -2 min
        await pilot.pause(0.2)
        assert source.now == forward - 120
        await pilot.press("left_square_bracket")  # -10 min: before the fatal line
        await pilot.pause(0.3)
        assert source.now == max(forward - 720, source.first)
        assert f"fatal:{LANE}" not in app.alerts.active
        # `a` jumps to each alert exactly when it was raised, in order, up to the fatal one
        # (other alerts, e.g. an early thrash suspicion, may come before it)
        raised = sorted({t for t, a in alerts if not a.notified and t > source.now})
        for t in raised[: raised.index(t_fatal) + 1]:
            await pilot.press("a")
            await pilot.pause(0.3)
            assert source.now == t
        assert source.now == t_fatal
        assert f"fatal:{LANE}" in app.alerts.active
        assert shown_raised_at(app) == live_raised_at(recorded, source.now)  # never the seek's
        later = [t for t in raised if t > t_fatal]
        if later:  # the next alert after the fatal one
            await pilot.press("a")
            await pilot.pause(0.2)
            assert source.now == later[0]
        if t_thrash <= source.now:
            assert thrash.key in app.alerts.active
        here = source.now
        await pilot.press("right_square_bracket")  # +10 min
        await pilot.pause(0.3)
        assert source.now == min(here + 600, source.last)
        live = live_raised_at(recorded, source.now)  # raised before the moment sought to
        assert any(t < source.now for t in live.values())
        assert shown_raised_at(app) == live
        # read-only: the action keys do nothing
        await pilot.press("P", "x", "s")
        await pilot.pause(0.1)
        assert app.screen is app.main_screen
