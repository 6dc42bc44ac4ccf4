"""Phone alerts for the events the night desk used to miss (issue 15): a
predicted OOM (one message per lane, however many ranks are predicted) and a
lane that passed its quality gate (lane-qualified), each with the next step
and never the token (at the desk; Boot D's prediction reaching the simulated
Home Assistant is in test_oom_alert_sim.py)."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from pathlib import Path

from sparktui.core.config import NotifyConfig
from sparktui.core.notify import NotifyPolicy
from sparktui.core.state import NodeState
from sparktui.service.events import Alert, AlertRaised, LaneChanged, LaneGone, ServiceEvent
from sparktui.service.lanes import LaneView
from sparktui.service.night import NightDesk
from sparktui.watch.readiness import RankContainer

from ..tui.simconsole import POLL_S, done, run_for, sim_console, until
from .test_night_desk import TOKEN, Phone
from .test_night_desk import desk as night_desk
from .test_night_sim import BOOT_STEP_S, PHONE, start_lane

EVENTS = ("predicted-oom", "lane-ready", "lane-qualified")


def desk(tmp_path: Path) -> tuple[NightDesk, Phone, list[ServiceEvent]]:
    d, phone, emitted, _ = night_desk(tmp_path, events=EVENTS)
    return d, phone, emitted


RANKS = tuple(RankContainer(i, n, f"sparktui-x-r{i}", 2, 8000, "vllm", True)
              for i, n in enumerate(("dgx5", "dgx6")))


def lane(phase: str, gate: str = "", text: str = "") -> LaneChanged:
    return LaneChanged(LaneView("x", "4nodes-switch-b", "vllm", 8000, RANKS, phase=phase,
                                gate=gate, gate_text=text))


def oom(node: str) -> AlertRaised:
    return AlertRaised(Alert(f"predicted oom:{node}", "predicted oom", node,
                             (f"{node} runs out at shard 118/141 in ~6 min {TOKEN}",),
                             "stop the lane now (`sparktui stop x`), or serve on more ranks"))


async def feed(d: NightDesk, *events: ServiceEvent) -> None:
    for ev in events:
        d.on_event(ev)
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)


async def test_predicted_oom_is_one_message_per_lane(tmp_path: Path) -> None:
    d, phone, emitted = desk(tmp_path)
    await feed(d, lane("loading weights"), oom("dgx5"), oom("dgx6"), oom("dgx5"))
    assert [t for _, t, _ in phone.sent] == ["sparktui PREDICTED-OOM x"]
    service, _, text = phone.sent[0]
    assert service == "notify.mobile_app_pixel" and TOKEN not in text
    assert text.startswith("x: dgx5 runs out at shard 118/141")
    assert "Next: stop the lane now (`sparktui stop x`)" in text
    assert any(isinstance(e, AlertRaised) and e.alert.notified
               and e.alert.key == "predicted oom:dgx5" for e in emitted)
    # the lane gone ends the incident: one recovery message once it stayed gone;
    # a new boot of the lane is a new incident (after the dedup window)
    await feed(d, LaneGone("x"))
    d.clock.t += d.config.notify.dedup_s  # type: ignore[attr-defined]
    await feed(d, lane("loading weights"), oom("dgx6"))
    assert [t for _, t, _ in phone.sent] == ["sparktui PREDICTED-OOM x",
                                             "sparktui RECOVERED PREDICTED-OOM x",
                                             "sparktui PREDICTED-OOM x"]
    assert "predicted-oom is over (lane gone)" in phone.sent[1][2]
    await d.stop()


async def test_ready_then_qualified_each_once_with_the_next_step(tmp_path: Path) -> None:
    d, phone, _ = desk(tmp_path)
    await feed(d, lane("serving"), lane("serving", "qualifying"), lane("serving", "qualifying"),
               lane("serving", "qualified", "CER 0.0 ‰, identifiers 6/6, d0 33.2 tg/s"),
               lane("serving", "qualified", "CER 0.0 ‰, identifiers 6/6, d0 33.2 tg/s"))
    assert [t for _, t, _ in phone.sent] == ["sparktui LANE-READY x",
                                             "sparktui LANE-QUALIFIED x"]
    ready, qualified = (m for _, _, m in phone.sent)
    assert "Next: qualify it before trusting it: `sparktui qualify x`" in ready
    assert qualified.startswith("x: qualified on 4nodes-switch-b: CER 0.0 ‰, identifiers 6/6")
    assert "Next: it can take traffic (port 8000)" in qualified
    await d.stop()


async def test_a_lane_found_qualified_is_told_once(tmp_path: Path) -> None:
    d, phone, _ = desk(tmp_path)
    await feed(d, lane("serving", "qualified", "6/6"), lane("serving", "qualified", "6/6"))
    assert [t for _, t, _ in phone.sent] == ["sparktui LANE-QUALIFIED x"]
    await d.stop()


async def test_a_lane_that_serves_then_qualifies_reaches_the_simulated_phone(
        tmp_path: Path) -> None:
    """The console's service, the simulator's Home Assistant: a lane found serving
    is lane-ready; the console's qualify (its plan, confirmed) makes it
    lane-qualified; one message per incident, with the next step, no token."""
    lane = "glm53-flash-eugr-2x"
    async with sim_console(tmp_path) as c:
        c.service.night.policy = NotifyPolicy(NotifyConfig(service=PHONE, events=EVENTS))
        seen: list[ServiceEvent] = []
        await c.service.start(seen.append)
        try:
            await until(c, lambda: c.service.snapshot().count(NodeState.ONLINE) == 8)
            await start_lane(c, lane)
            await until(c, lambda: lane in c.service.lanes()
                        and c.service.lanes()[lane].phase == "serving", step=BOOT_STEP_S,
                        max_sim_s=4 * 3600, why=lambda: str(c.service.lanes().get(lane)))
            preview = await done(c, c.service.preview_qualify(lane))
            assert preview.allowed and preview.plan is not None, preview.plan
            assert preview.run is not None
            result = await done(c, preview.run())  # its completions take simulated time
            assert result.ok, result.message

            def sent_titles() -> list[str]:
                return [str(b["title"]) for _, b in c.sim.ha.notifications]

            await until(c, lambda: f"sparktui LANE-QUALIFIED {lane}" in sent_titles(),
                        why=lambda: f"{sent_titles()} {c.service.lanes().get(lane)}")
            await run_for(c, 5 * POLL_S)
            sent, token = list(c.sim.ha.notifications), c.sim.ha.token
        finally:
            await c.service.stop()
    phases = [e.lane.phase for e in seen if isinstance(e, LaneChanged)]
    titles = [str(b["title"]) for _, b in sent]
    assert titles[0] == f"sparktui LANE-READY {lane}"
    assert titles.count(f"sparktui LANE-QUALIFIED {lane}") == 1, titles
    # one "ready" per incident: another only after the lane left serving (a loaded
    # machine can make the canary miss) and the dedup window passed
    left = sum(1 for a, b in pairwise(phases) if a == "serving" and b != "serving")
    assert titles.count(f"sparktui LANE-READY {lane}") - 1 <= left, (titles, phases)
    ready = str(sent[0][1]["message"])
    qualified = next(str(b["message"]) for _, b in sent if "QUALIFIED" in str(b["title"]))
    assert f"Next: qualify it before trusting it: `sparktui qualify {lane}`" in ready
    assert qualified.startswith(f"{lane}: qualified on ") and "Next: it can take traffic" \
        in qualified
    assert token not in str(sent)
