"""A node's stale age (the age of its last good sample, by its state in the
Nodes table) is reckoned against the console's clock, a replay's when
replaying: between two recorded samples of a starved node it goes on growing
with the replay clock instead of staying at the age its snapshot was taken at."""

from __future__ import annotations

from dataclasses import replace

from sparktui.core.config_load import load_config
from sparktui.core.state import NodeState
from sparktui.service.events import ServiceEvent
from sparktui.service.replay import ReplaySource
from sparktui.tui.replay import ReplayApp
from sparktui.tui.widgets.tables import NodesTable

from .harness import wait_for
from .test_replay_snapshot import ROOT, T0, node_sample


def night() -> list[tuple[float, ServiceEvent]]:
    out: list[tuple[float, ServiceEvent]] = []
    for step in range(3):
        t = T0 + 30 * step
        for node in (f"dgx{i}" for i in range(1, 9)):
            ev = node_sample(node, t, 100.0, 0.0)
            if node == "dgx6" and step == 2:  # its probe hangs: starved since T0 + 30
                ev = node_sample(node, t, 0, 0, NodeState.STARVED)
                ev = replace(ev, snapshot=replace(ev.snapshot, last_ok_at=T0 + 30))
            out.append((t, ev))
    out.append((T0 + 900, node_sample("dgx1", T0 + 900, 100.0, 0.0)))  # the night goes on
    return out


async def test_a_starved_age_grows_with_the_replay_clock() -> None:
    config = load_config(ROOT / "config.toml")
    source = ReplaySource(config, night(), start=T0 + 60)
    source.paused = True
    app = ReplayApp(config, source)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.main_screen.query_one(NodesTable)

        def state() -> str:
            return str(table.get_cell("dgx6", "state"))

        await wait_for(pilot, lambda: state().startswith("STARVED"))
        assert state() == "STARVED 30s"
        source.now = T0 + 330  # the replay clock runs; no new sample of dgx6
        table._age()  # what its timer does every second
        assert state() == "STARVED 5m00s"
        assert str(table.get_cell("dgx1", "state")) == "online"  # fresh rows: no age
