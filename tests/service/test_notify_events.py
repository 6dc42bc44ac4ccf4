"""Phone alerts for the events the night desk used to miss (issue 15): a
predicted OOM (one message per lane, however many ranks are predicted) and a
lane that passed its quality gate (lane-qualified), each with the next step
and never the token; at the desk, then against the simulated Home Assistant."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from types import SimpleNamespace

from sparktui.core.config import NotifyConfig
from sparktui.core.config_load import load_config
from sparktui.core.notify import NotifyPolicy
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.service.events import Alert, AlertRaised, LaneChanged, LaneGone, ServiceEvent
from sparktui.service.lanes import LaneView
from sparktui.service.night import NightDesk
from sparktui.sim.testing import connect
from sparktui.watch.readiness import RankContainer

from ..tui.simconsole import sim_console

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "secret-token-123456"
PHONE = "notify.mobile_app_pixel"
EVENTS = ("predicted-oom", "lane-ready", "lane-qualified")


class Clock:
    t = 1_764_450_000.0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


class Phone:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    async def notify(self, service: str, title: str, message: str) -> None:
        self.sent.append((service, title, message))


def desk(tmp_path: Path) -> tuple[NightDesk, Phone, list[ServiceEvent]]:
    config = dataclasses.replace(load_config(ROOT / "config.toml"),
                                 notify=NotifyConfig(service=PHONE, events=EVENTS))
    d = NightDesk(config, clock=Clock(), state_dir=tmp_path)  # type: ignore[arg-type]
    d.auto_bundle = False
    phone = Phone()
    emitted: list[ServiceEvent] = []
    d.attach(lambda: SimpleNamespace(secrets=(TOKEN,)), dict,  # type: ignore[arg-type,return-value]
             emit=lambda e: emitted.append(d.on_event(e)), phone=phone)
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
    assert service == PHONE and TOKEN not in text
    assert text.startswith("x: dgx5 runs out at shard 118/141")
    assert "Next: stop the lane now (`sparktui stop x`)" in text
    assert any(isinstance(e, AlertRaised) and e.alert.notified
               and e.alert.key == "predicted oom:dgx5" for e in emitted)
    # a new boot of the lane is a new incident (after the dedup window)
    await feed(d, LaneGone("x"))
    d.clock.t += d.config.notify.dedup_s  # type: ignore[attr-defined]
    await feed(d, lane("loading weights"), oom("dgx6"))
    assert [t for _, t, _ in phone.sent] == ["sparktui PREDICTED-OOM x"] * 2
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


BOOT_D = "dsv41-flash-r37-4x-eager"


async def test_boot_d_predicted_oom_reaches_the_simulated_phone_once(tmp_path: Path) -> None:
    async with sim_console(tmp_path, "boot-d-oom") as c:
        events: list[ServiceEvent] = []
        c.service.night.policy = NotifyPolicy(NotifyConfig(service=PHONE, events=EVENTS))
        await c.service.start(events.append)
        try:
            r = load_recipe(c.config, BOOT_D)

            async def one(rank) -> None:  # type: ignore[no-untyped-def]
                async with connect(c.sim, rank.node) as conn:
                    result = await conn.run(rank.command(3), timeout=30)
                    assert result.exit_status == 0, result.stderr

            await asyncio.gather(*(one(rank) for rank in plan(c.config, r, r.cluster).ranks))

            def predicted() -> set[str]:
                return {e.alert.subject for e in events if isinstance(e, AlertRaised)
                        and e.alert.key.startswith("predicted oom:")}

            end = asyncio.get_running_loop().time() + 90
            while not (predicted() and c.sim.ha.notifications):
                assert asyncio.get_running_loop().time() < end, \
                    f"no phone message: {predicted()} {c.sim.ha.notifications}"
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # the other ranks' predictions come in
            sent = list(c.sim.ha.notifications)
            token = c.sim.ha.token
        finally:
            await c.service.stop()
    assert [(s, b["title"]) for s, b in sent] == [(PHONE, f"sparktui PREDICTED-OOM {BOOT_D}")]
    text = str(sent[0][1]["message"])
    assert text.startswith(f"{BOOT_D}: dgx") and " runs out at " in text
    assert "Next: stop the lane now" in text or "Next: " in text
    assert f"sparktui stop {BOOT_D}" in text and token not in str(sent)
