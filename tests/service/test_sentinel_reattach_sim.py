"""Issue 25, against the simulator: a console attached to a sentinel that
stops says SENTINEL LOST and watches alone (its own poller, its own lane
watch, its own desk), keeps trying to attach again, and when a sentinel is
back re-attaches by itself: the lost alert cleared (its "re-attached"), its
own tasks ended, one poller's worth of probes again, no alert it raised
alone left standing, none raised twice, nothing phoned or recorded by it."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from sparktui.adapters.endpoints import resolve_endpoints
from sparktui.service.attach import LOST_KEY, REATTACH_MAX_S, socket_path
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertCleared, AlertRaised, LaneChanged, ServiceEvent
from sparktui.service.sentinel import Sentinel

from .simnight import Night, advance_until, boot_unwatched, night, phase, with_phone

LANE = "glm53-mxfp4-fp8-4x-r39-196k"


class Console:
    def __init__(self, service: ClusterService) -> None:
        self.service = service
        self.events: list[ServiceEvent] = []

    def raised(self, since: int = 0) -> Counter[str]:
        return Counter(e.alert.key for e in self.events[since:]
                       if isinstance(e, AlertRaised) and not e.alert.notified)

    def serving(self) -> bool:
        view = self.service.lanes().get(LANE)
        return view is not None and view.phase == "serving"


def simulated(task: asyncio.Task[object]) -> bool:
    """A task of the simulated cluster's servers (its sshd, its engines' HTTP)
    answering a connection the console keeps open for its actions, not the
    console's own."""
    where = task.get_coro().cr_code.co_filename  # type: ignore[union-attr]
    return "/sparktui/sim/" in where or where.endswith("/aiohttp/web_protocol.py")


def probes(n: Night) -> dict[str, int]:
    return {node: n.sim.nodes[node].probes for node in n.config.nodes}


async def test_a_console_re_attaches_when_the_sentinel_is_back(tmp_path: Path) -> None:
    async with night(tmp_path, "normal", "4nodes-switch-b", start=False) as n:
        with_phone(n)
        state_dir = n.config.state_dir()
        endpoints = resolve_endpoints(n.config)
        await boot_unwatched(n, LANE)
        first_stop = asyncio.Event()
        first = asyncio.create_task(Sentinel(n.config, n.service, clock=n.sim.clock,
                                             emit=lambda p, t: None).run(first_stop))
        console = Console(ClusterService(n.config, clock=n.sim.clock, endpoints=endpoints,
                                         sentinel=socket_path(state_dir)))
        second_stop = asyncio.Event()
        second: asyncio.Task[None] | None = None
        try:
            await advance_until(n, lambda: phase(n, LANE) == "serving", step=5.0,
                                max_sim_s=300, why=lambda: phase(n, LANE))
            await console.service.start(console.events.append)
            assert console.service.attached.startswith("attached to sentinel")
            await advance_until(n, console.serving, step=1.0, max_sim_s=30)
            before_loss = set(asyncio.all_tasks())

            # -- the sentinel stops: SENTINEL LOST, watching alone -------------------
            first_stop.set()
            await asyncio.wait_for(first, 60)
            await advance_until(n, lambda: LOST_KEY in {a.key for a in console.service.alerts()},
                                step=1.0, max_sim_s=30)
            assert not console.service.attached
            lost_at = len(console.events)
            await advance_until(n, lambda: any(
                isinstance(e, LaneChanged) and e.lane.name == LANE and e.lane.phase == "serving"
                for e in console.events[lost_at:]), step=2.0, max_sim_s=300)  # its own watch
            alone_at = n.sim.clock.monotonic()
            await advance_until(n, lambda: n.sim.clock.monotonic() - alone_at >= 400,
                                step=200.0, max_sim_s=450)  # alone a while: the tries back off
            alone = set(asyncio.all_tasks()) - before_loss
            assert console.service._alone and not any(t.done() for t in console.service._alone)

            # -- a sentinel is back: the console re-attaches -------------------------
            service = ClusterService(n.config, clock=n.sim.clock, endpoints=endpoints,
                                     canary=n.canary)
            second = asyncio.create_task(Sentinel(n.config, service, clock=n.sim.clock,
                                                  emit=lambda p, t: None).run(second_stop))
            back = n.sim.clock.monotonic()
            await advance_until(n, lambda: bool(console.service.attached), step=1.0,
                                max_sim_s=REATTACH_MAX_S + 30)
            assert n.sim.clock.monotonic() - back <= REATTACH_MAX_S + 30
            reattached = len(console.events)
            await advance_until(n, lambda: AlertCleared(LOST_KEY) in console.events,
                                step=1.0, max_sim_s=30)  # the re-attach, said
            await advance_until(n, console.serving, step=1.0, max_sim_s=60)
            assert not console.service._alone and console.service.night.recorder is None
            # what it started alone has ended: poller, lane watch, canary, journals
            await asyncio.sleep(0.1)
            left = [t.get_coro().__qualname__ for t in alone  # type: ignore[union-attr]
                    if not t.done() and not simulated(t)]
            assert not left, left

            # one poller again, and nothing of its own
            sent = len(console.service.night.sent)
            counted = probes(n)
            window = 100.0
            t0 = n.sim.clock.monotonic()
            while n.sim.clock.monotonic() - t0 < window:
                await n.sim.clock.advance(5.0, step=5.0)
                await asyncio.sleep(0.02)
            cfg = n.config.console
            one_poller = window / cfg.poll_interval_s + window / cfg.slow_probe_interval_s
            for node, was in counted.items():
                assert 1 <= n.sim.nodes[node].probes - was <= one_poller + 2, node
            assert len(console.service.night.sent) == sent
            assert {a.key for a in console.service.alerts()} == {a.key for a in service.alerts()}
            assert console.raised()[LOST_KEY] == 1
            twice = [k for k, c in console.raised(reattached).items() if c > 1]
            assert not twice, twice
        finally:
            await console.service.stop()
            first_stop.set()
            second_stop.set()
            await asyncio.wait_for(first, 60)
            if second is not None:
                await asyncio.wait_for(second, 60)


async def test_an_attached_only_console_never_polls_and_re_attaches(tmp_path: Path) -> None:
    """`console --attached-only` (each `sparktui web` session) whose sentinel
    stops: "sentinel lost, re-attaching…", the sentinel's last state shown with
    every lane stale, not one probe of its own however long the sentinel is
    away; a sentinel back, it re-attaches and the lanes are fresh again."""
    async with night(tmp_path, "normal", "4nodes-switch-b", start=False) as n:
        state_dir = n.config.state_dir()
        endpoints = resolve_endpoints(n.config)
        await boot_unwatched(n, LANE)
        first_stop = asyncio.Event()
        first = asyncio.create_task(Sentinel(n.config, n.service, clock=n.sim.clock,
                                             emit=lambda p, t: None).run(first_stop))
        console = Console(ClusterService(n.config, clock=n.sim.clock, endpoints=endpoints,
                                         sentinel=socket_path(state_dir), attached_only=True))
        second_stop = asyncio.Event()
        second: asyncio.Task[None] | None = None
        try:
            await advance_until(n, lambda: phase(n, LANE) == "serving", step=5.0,
                                max_sim_s=300, why=lambda: phase(n, LANE))
            await console.service.start(console.events.append)
            assert console.service.attached.startswith("attached to sentinel")
            await advance_until(n, console.serving, step=1.0, max_sim_s=30)
            assert console.service.lanes()[LANE].stale_s is None
            known = {s.node: s for s in console.service.snapshot().nodes}

            # -- the sentinel stops: lost, the last state stale, nothing polled ------
            first_stop.set()
            await asyncio.wait_for(first, 60)
            await advance_until(n, lambda: LOST_KEY in {a.key for a in console.service.alerts()},
                                step=1.0, max_sim_s=30)
            lost = next(a for a in console.service.alerts() if a.key == LOST_KEY)
            assert lost.evidence[0].startswith("sentinel lost, re-attaching…: the sentinel (pid ")
            assert "never polls the nodes itself" in lost.evidence[0]
            counted = probes(n)
            shells = {node: n.sim.nodes[node].probe_shells for node in n.config.nodes}
            away = n.sim.clock.monotonic()
            await advance_until(n, lambda: n.sim.clock.monotonic() - away >= 300, step=20.0,
                                max_sim_s=330)  # away for minutes: the tries back off
            assert probes(n) == counted
            assert {node: n.sim.nodes[node].probe_shells for node in n.config.nodes} == shells
            assert not console.service._alone and console.service.poller is not None
            assert not console.service.poller._tasks
            view = console.service.lanes()[LANE]
            assert view.phase == "serving" and view.stale_s is not None and view.stale_s >= 300
            assert {s.node: s for s in console.service.snapshot().nodes} == known

            # -- a sentinel is back: re-attached, fresh again --------------------------
            service = ClusterService(n.config, clock=n.sim.clock, endpoints=endpoints,
                                     canary=n.canary)
            second = asyncio.create_task(Sentinel(n.config, service, clock=n.sim.clock,
                                                  emit=lambda p, t: None).run(second_stop))
            await advance_until(n, lambda: bool(console.service.attached), step=1.0,
                                max_sim_s=REATTACH_MAX_S + 30)
            await advance_until(n, lambda: AlertCleared(LOST_KEY) in console.events,
                                step=1.0, max_sim_s=30)
            await advance_until(n, lambda: console.serving()
                                and console.service.lanes()[LANE].stale_s is None,
                                step=1.0, max_sim_s=60)
            assert console.raised()[LOST_KEY] == 1
        finally:
            await console.service.stop()
            first_stop.set()
            second_stop.set()
            await asyncio.wait_for(first, 60)
            if second is not None:
                await asyncio.wait_for(second, 60)
