"""The console (Pilot) attached to a sentinel's socket: its header says so,
what the sentinel reports is what it shows, it polls no node itself; when
the sentinel goes, the alert says so, the header loses the mark and the
console's own poller takes over; when a sentinel is back the console
re-attaches by itself: the lost alert cleared as "re-attached", a notice,
the header's mark again, its own poller stopped."""

from __future__ import annotations

import tempfile
from pathlib import Path

from sparktui.core.clock import SystemClock
from sparktui.core.config_load import load_config
from sparktui.core.state import NodeSnapshot, NodeState
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.service.attach import SentinelHub, socket_path
from sparktui.service.cluster import ClusterService
from sparktui.service.events import Alert, AlertRaised, NodeSampled
from sparktui.tui.app import make_app

from ..tui.fakecluster import FakePower, fake_endpoints, fake_fleet
from ..tui.harness import ROOT, ScaledClock, wait_for


async def test_the_console_shows_the_sentinels_night_and_then_its_own(tmp_path: Path) -> None:
    config = load_config(ROOT / "config.toml")
    fleet = fake_fleet(config)
    hub = SentinelHub(socket_path(tmp_path), clock=SystemClock(), pid=4711)
    for node in config.nodes:  # the sentinel saw dgx6 starve before the console came
        state = NodeState.STARVED if node == "dgx6" else NodeState.ONLINE
        level = ThrashLevel.THRASH if node == "dgx6" else ThrashLevel.OK
        hub.publish(NodeSampled(NodeSnapshot(node, state, 100.0, last_ok_at=90.0),
                                ThrashVerdict(node, level, ("PSI full 41 %",), "", 0), None))
    thrash = Alert("thrash:dgx6", "thrash", "dgx6", ("PSI full avg10 41.2 %",),
                   "recover dgx6", notified=True)
    hub.publish(AlertRaised(thrash))
    await hub.start()
    service = ClusterService(config, links=fleet, endpoints=fake_endpoints(config),
                             clock=ScaledClock(0.0), liveness=fleet.alive,
                             power=FakePower(fleet, config), sentinel=socket_path(tmp_path),
                             state_dir=Path(tempfile.mkdtemp(prefix="sparktui-", dir=tmp_path)))
    app = make_app(config, service=service)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: "thrash:dgx6" in app.alerts.active)
            await wait_for(pilot, lambda: "attached to sentinel (pid 4711)" in str(app.sub_title))
            assert service.snapshot().get("dgx6").state is NodeState.STARVED  # type: ignore[union-attr]
            assert service.verdict("dgx6").level is ThrashLevel.THRASH  # the node details'
            assert not any(n.probes for n in fleet.nodes.values())  # no second poller

            await hub.close()
            await wait_for(pilot, lambda: "sentinel:lost" in app.alerts.active)
            await wait_for(pilot, lambda: all(n.probes for n in fleet.nodes.values()))
            await wait_for(pilot, lambda: "attached" not in str(app.sub_title)
                           and "online" in str(app.sub_title))

            # a sentinel is back (a restart: another pid, its own night)
            back = SentinelHub(socket_path(tmp_path), clock=SystemClock(), pid=4712)
            pressure = Alert("thrash:dgx7", "thrash suspected", "dgx7", ("PSI some 30 %",),
                             "watch dgx7")
            back.publish(AlertRaised(pressure))
            await back.start()
            try:
                await wait_for(pilot, lambda: "attached to sentinel (pid 4712)"
                               in str(app.sub_title), timeout=20)
                await wait_for(pilot, lambda: "sentinel:lost" not in app.alerts.active)
                assert set(app.alerts.active) == {"thrash:dgx7"}  # the new sentinel's alone
                assert any(e.alert.key == "sentinel:lost" and e.why_cleared == "re-attached"
                           for e in app.alerts.cleared)
                assert any("re-attached: attached to sentinel (pid 4712)" in n[2]
                           for n in app.notices)
                probed = sum(n.probes for n in fleet.nodes.values())
                await pilot.pause(1.5)  # its own poller stopped
                assert sum(n.probes for n in fleet.nodes.values()) == probed
            finally:
                await back.close()
    finally:
        await hub.close()
