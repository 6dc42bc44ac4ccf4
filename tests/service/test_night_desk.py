"""The night desk without a cluster: which service events reach the phone,
once per incident, the alert marked notified, the token never sent; and
recording off when [record] says so."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from types import SimpleNamespace

from sparktui.core.config import NotifyConfig, RecordConfig
from sparktui.core.config_load import load_config
from sparktui.ops.events import WorkflowFinished
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    LaneChanged,
    ServiceEvent,
    WorkflowProgressed,
)
from sparktui.service.lanes import LaneView
from sparktui.service.night import NightDesk

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "secret-token-123456"


class Clock:
    def __init__(self) -> None:
        self.t = 1_764_450_000.0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


class Phone:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    async def notify(self, service: str, title: str, message: str, *, tag: str = "") -> None:
        self.sent.append((service, title, message))
        self.tags.append(tag)


def desk(tmp_path: Path, *, events: tuple[str, ...], record: bool = True,  # type: ignore[no-untyped-def]
         clock: Clock | None = None):
    config = load_config(ROOT / "config.toml")
    config = dataclasses.replace(
        config, notify=NotifyConfig(service="notify.mobile_app_pixel", events=events),
        record=RecordConfig(enabled=record))
    clock = clock or Clock()
    d = NightDesk(config, clock=clock, state_dir=tmp_path)  # type: ignore[arg-type]
    d.auto_bundle = False
    phone = Phone()
    emitted: list[ServiceEvent] = []
    d.attach(lambda: SimpleNamespace(secrets=(TOKEN,)), dict,  # type: ignore[arg-type,return-value]
             emit=lambda e: emitted.append(d.on_event(e)), phone=phone)
    return d, phone, emitted, clock


def lane(phase: str) -> LaneChanged:
    return LaneChanged(LaneView("x", "4nodes-switch-b", "vllm", 8000, (), phase=phase))

async def feed(d: NightDesk, clock: Clock, *events: ServiceEvent, step: float = 30.0) -> None:
    """Each event ``step`` s after the last, then time for what is due to be sent."""
    for ev in events:
        clock.t += step
        d.on_event(ev)
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)



async def test_each_selected_event_reaches_the_phone_once(tmp_path: Path) -> None:
    d, phone, emitted, clock = desk(tmp_path, events=("fatal", "stall", "lane-ready",
                                                      "workflow-failed", "thrash"))
    fatal = Alert("fatal:x", "fatal", "x", (f"rank 1: boom {TOKEN}",), "stop the lane (x)")
    for ev in (lane("loading weights"), lane("serving"), lane("serving"), AlertRaised(fatal),
               AlertRaised(fatal), lane("stalled"), lane("stalled"),
               WorkflowProgressed(WorkflowFinished("wf", clock.t, "power-cycle", "dgx6",
                                                   False, "plug unavailable")),
               AlertRaised(Alert("pressure:dgx5", "pressure", "dgx5", ("PSI",), "watch"))):
        emitted.append(d.on_event(ev))
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    titles = [t for _, t, _ in phone.sent]
    assert titles == ["sparktui LANE-READY x", "sparktui FATAL x", "sparktui STALL x",
                      "sparktui WORKFLOW-FAILED dgx6"]
    assert all(TOKEN not in m for _, _, m in phone.sent)
    assert all("Next: " in m for _, t, m in phone.sent if "LANE-READY" not in t)
    marked = {e.alert.key for e in emitted if isinstance(e, AlertRaised) and e.alert.notified}
    assert marked == {"fatal:x"}
    # a later re-raise of the same incident arrives already marked, and sends nothing
    again = d.on_event(AlertRaised(dataclasses.replace(fatal, evidence=("rank 1: more",))))
    assert isinstance(again, AlertRaised) and again.alert.notified
    # the incident clears and returns within the dedup window: still one message
    d.on_event(AlertCleared("fatal:x"))
    d.on_event(AlertRaised(fatal))
    await asyncio.sleep(0.05)
    assert [t for _, t, _ in phone.sent].count("sparktui FATAL x") == 1
    await d.stop()


async def test_unselected_events_and_recording_off(tmp_path: Path) -> None:
    d, phone, _, _ = desk(tmp_path, events=("thrash",), record=False)
    d.on_event(AlertRaised(Alert("fatal:x", "fatal", "x", ("boom",), "stop")))
    d.on_event(lane("serving"))
    await asyncio.sleep(0.05)
    assert phone.sent == [] and d.recorder is None
    assert not (tmp_path / "recordings").exists()
    await d.stop()


def test_a_rank_whose_node_went_dark_stays_the_lanes() -> None:
    """A dark node's containers are not read, so its ranks drop out of the
    lane's view; the held memory still places them (the incident bundle of a
    thrashing node is its lane's, naming every rank). Served again on another
    cluster, the lane starts afresh."""
    from sparktui.service.night import HeldMemory
    from sparktui.watch.readiness import RankContainer

    def view(cluster: str, nodes: dict[int, str]) -> LaneChanged:
        ranks = tuple(RankContainer(r, n, f"sparktui-x-r{r}", len(nodes), 8000 if r == 0 else None,
                                    "vllm", True) for r, n in nodes.items())
        return LaneChanged(LaneView("x", cluster, "vllm", 8000, ranks, phase="serving"))

    memory = HeldMemory(SimpleNamespace(time=lambda: 0.0))  # type: ignore[arg-type]
    four = {0: "dgx5", 1: "dgx6", 2: "dgx7", 3: "dgx8"}
    memory.fold(view("4nodes-switch-b", four))
    memory.fold(view("4nodes-switch-b", {0: "dgx5", 3: "dgx8"}))  # dgx6, dgx7 dark
    assert memory.held().lane_nodes == {"x": four}
    memory.fold(view("2nodes-a", {0: "dgx1", 1: "dgx2"}))
    assert memory.held().lane_nodes == {"x": {0: "dgx1", 1: "dgx2"}}


async def test_one_alert_and_one_recovery_message_per_incident(tmp_path: Path) -> None:
    d, phone, _, clock = desk(tmp_path, events=("thrash",))
    thrash = Alert("thrash:dgx6", "thrash", "dgx6", ("PSI full 71 %",), "reduce load now")
    suspected = dataclasses.replace(thrash, level="thrash suspected")
    quiet = lane("serving")  # any later event lets the desk send what is due

    await feed(d, clock, AlertRaised(suspected), AlertRaised(thrash), AlertRaised(thrash),
               AlertRaised(suspected), AlertCleared("thrash:dgx6"))
    await feed(d, clock, AlertRaised(thrash), AlertCleared("thrash:dgx6"))  # flapped back: goes on
    await feed(d, clock, quiet, quiet, quiet, quiet, quiet)
    assert [t for _, t, _ in phone.sent] == ["sparktui THRASH dgx6",
                                             "sparktui RECOVERED THRASH dgx6"]
    assert phone.sent[1][2] == ("dgx6: thrash is over (alert cleared); it lasted 2 min "
                                "from the alert.")
    assert phone.tags == ["sparktui-thrash-dgx6"] * 2  # the recovery replaces the alert
    await d.stop()


async def test_the_desk_names_a_notify_service_home_assistant_lacks(tmp_path: Path) -> None:
    d, phone, _, _ = desk(tmp_path, events=("thrash",))

    async def services(domain: str) -> list[str]:
        return ["notify.mobile_app_pixel_8", "notify.persistent_notification"]

    phone.services = services  # type: ignore[attr-defined]
    problem = await d.phone_problem()  # the desk's service is notify.mobile_app_pixel
    assert problem is not None and problem.startswith(
        "notify.mobile_app_pixel does not exist in Home Assistant (it has: "
        "notify.mobile_app_pixel_8, notify.persistent_notification)")

    async def refused(domain: str) -> list[str]:
        raise RuntimeError("HTTP 401: refused")

    phone.services = refused  # type: ignore[attr-defined]
    assert await d.phone_problem() == ("could not check [notify] service "
                                       "notify.mobile_app_pixel: HTTP 401: refused")
    await d.stop()


async def test_an_unresponsive_lane_is_paged_once_and_told_over(tmp_path: Path) -> None:
    """The canary's UNRESPONSIVE (``canary:<lane>``, raised again every round
    while it lasts) is a phone incident as a FATAL is, by default: one
    message, one recovery under the same tag, none again within the dedup
    window, and kept in phone.json so a restarted desk does not page it again."""
    d, phone, _, clock = desk(tmp_path, events=NotifyConfig().events)
    hung = Alert("canary:x", "unresponsive", "x",
                 ("no token processed in 40 s (3 waiting)",), "stop the lane (x) and re-serve")

    await feed(d, clock, AlertRaised(hung), AlertRaised(hung), AlertRaised(hung))
    assert [t for _, t, _ in phone.sent] == ["sparktui UNRESPONSIVE x"]
    assert "no token processed in 40 s" in phone.sent[0][2]
    assert "Next: stop the lane (x)" in phone.sent[0][2]
    again, again_phone, _, _ = desk(tmp_path, events=NotifyConfig().events, clock=clock)
    again.on_event(AlertRaised(hung))  # a restarted desk reads it went
    await asyncio.sleep(0.05)
    assert again_phone.sent == []
    await again.stop()
    await feed(d, clock, AlertCleared("canary:x"), *[lane("serving")] * 5)
    assert [t for _, t, _ in phone.sent] == ["sparktui UNRESPONSIVE x",
                                             "sparktui RECOVERED UNRESPONSIVE x"]
    assert phone.sent[1][2].startswith("x: unresponsive is over (alert cleared)")
    assert phone.tags == ["sparktui-unresponsive-x"] * 2
    await feed(d, clock, AlertRaised(hung))  # back within the dedup window: no second page
    assert len(phone.sent) == 2
    await d.stop()
