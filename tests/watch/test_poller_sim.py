"""The poller and `sparktui health` against the simulated cluster over real SSH:
8 nodes online, a thrashing (starved) node, a powered-off node, and recovery
after a power cycle without restarting anything."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from sparktui.adapters.endpoints import Endpoints, resolve_endpoints, sim_endpoints_path
from sparktui.adapters.homeassistant import open_home_assistant, plug_power_source
from sparktui.adapters.ssh import Fleet
from sparktui.cli.main import main
from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.core.state import NodeState
from sparktui.core.thrash import ThrashLevel
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import running_sim
from sparktui.watch.poller import Poller
from sparktui.watch.thrash import ThrashDetector

SHIPPED = Path(__file__).resolve().parents[2] / "config.toml"
GIB = 1024**3


CONNECT_TIMEOUT_S = 4.0
"""The login budget (real seconds; 10 shipped): a starved node's fresh shell
costs a poll this long. In-process logins take well under a second."""


def sim_config(tmp: Path) -> Config:
    config = load_config(SHIPPED)
    console = replace(config.console, state_dir=str(tmp / "state"), probe_timeout_s=5.0)
    liveness = replace(config.liveness, timeout_s=2.0)
    ssh = replace(config.ssh, connect_timeout_s=CONNECT_TIMEOUT_S)
    return replace(config, console=console, liveness=liveness, ssh=ssh)


def publish_endpoints(config: Config, sim: Sim) -> Endpoints:
    """What `sparktui sim` does at start: write the endpoints file."""
    path = sim_endpoints_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sim.endpoints()))
    return resolve_endpoints(config)


@dataclass
class Rig:
    config: Config
    sim: Sim
    fleet: Fleet
    poller: Poller


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    config = sim_config(tmp_path)
    async with running_sim(config) as sim:
        endpoints = publish_endpoints(config, sim)
        fleet = Fleet.from_config(config, endpoints, clock=sim.clock)
        ha = open_home_assistant(config, endpoints, clock=sim.clock)
        plugs = plug_power_source(ha, {n.name: n.switch for n in config.nodes.values()})
        poller = Poller(config, fleet, endpoints, clock=sim.clock, power=plugs)
        try:
            yield Rig(config, sim, fleet, poller)
        finally:
            await fleet.close()
            await ha.aclose()


async def test_eight_nodes_online_and_free(rig: Rig) -> None:
    snap = await rig.poller.poll_round()
    assert [s.node for s in snap.nodes] == [f"dgx{i}" for i in range(1, 9)]
    assert all(s.state is NodeState.ONLINE for s in snap.nodes), [s.error for s in snap.nodes]
    for s in snap.nodes:
        assert s.probe is not None and s.probe.problems == (), s.probe.problems
        assert s.probe.meminfo is not None and s.probe.meminfo.total_kib == 127600748
        assert s.probe.kernel == "6.17.0-1031-nvidia"
        assert s.probe.mount_at("/mnt/nas") is not None
        assert s.probe.hf_cache is not None and s.probe.hf_cache.is_symlink
        assert not s.probe.busy and s.powered is True and s.liveness is True


async def test_thrash_shows_as_starved_then_power_cycle_recovers(rig: Rig) -> None:
    await rig.poller.poll_round()  # connections and shells open (generous timeout)
    rig.poller.probe_timeout_s = 1.5  # a starved node costs this much per round
    # dgx6 takes more memory than the kernel can give: the seeds' 22:45 hang
    rig.sim.nodes["dgx6"].memory.set("hog", 125 * GIB)
    rig.sim.notify()
    await rig.sim.advance(30)
    snap = (await rig.poller.poll_round()).get("dgx6")
    assert snap is not None and snap.state is NodeState.STARVED
    assert snap.stalled and snap.liveness is True and snap.powered is True
    others = (await rig.poller.poll_round()).nodes
    assert [s.node for s in others if s.state is not NodeState.ONLINE] == ["dgx6"], \
        [(s.node, s.error) for s in others if s.state is not NodeState.ONLINE]

    await rig.sim.power("dgx6", False)  # the HA plug: off ...
    off = (await rig.poller.poll_round()).get("dgx6")
    assert off is not None and off.state is NodeState.POWERED_OFF and off.powered is False

    await rig.sim.power("dgx6", True)  # ... and on again; the node boots
    await rig.sim.advance(60)
    await rig.sim.settle()
    back = (await rig.poller.poll_round()).get("dgx6")
    assert back is not None and back.state is NodeState.ONLINE, back.error
    assert back.consecutive_failures == 0
    assert back.probe is not None and back.probe.meminfo is not None
    assert back.probe.meminfo.available_kib > 100 * 1024 * 1024  # memory freed by the cycle
    assert back.probe.uptime_s is not None and back.probe.uptime_s < 120
    history = rig.poller.history("dgx6")
    assert history[-1].t == back.taken_at


async def test_a_cycle_between_two_polls_is_read_from_the_plugs_last_changed(rig: Rig) -> None:
    """A wall-clock sentinel beside a simulator at 60x polls each plug every few
    wall seconds: a plug cycle of 30 simulated seconds falls between two polls,
    which both read the plug on. Its ``last_changed`` moved, and the node does
    not answer: the detector counts it as the power cycle it was (a boot, no
    thrash evidence), not as a node that went silent."""
    detector = ThrashDetector(clock=rig.sim.clock)
    for snap in (await rig.poller.poll_round()).nodes:
        detector.on_snapshot(snap)
    before = (await rig.poller.poll_round()).get("dgx6")
    assert before is not None and before.powered is True and before.plug_changed
    await rig.sim.power("dgx6", False)
    await rig.sim.advance(30)
    await rig.sim.power("dgx6", True)  # the node boots: it is not read for a while
    await rig.sim.advance(5)
    rig.poller.probe_timeout_s = 1.5
    booting = (await rig.poller.poll_round()).get("dgx6")
    assert booting is not None and booting.powered is True and booting.probe is None
    assert booting.plug_changed != before.plug_changed
    for snap in (before, booting):
        verdict = detector.on_snapshot(snap)
    assert verdict.level is ThrashLevel.OK, verdict
    assert "back from a power cycle" in verdict.evidence[-1]


async def test_unreachable_when_node_is_gone_without_ha(rig: Rig) -> None:
    await rig.poller.poll_round()
    rig.sim.set_power("dgx3", False)  # power lost behind HA's back
    await rig.sim.settle()
    rig.poller._power = None
    snap = (await rig.poller.poll_round()).get("dgx3")
    assert snap is not None and snap.state is NodeState.UNREACHABLE and snap.liveness is False


async def test_loops_publish_to_subscribers(rig: Rig) -> None:
    queue = rig.poller.subscribe()
    async with rig.poller:
        seen: set[str] = set()
        async with asyncio.timeout(10):
            while len(seen) < 8:
                seen.add((await queue.get()).node)
    assert seen == {f"dgx{i}" for i in range(1, 9)}


async def test_health_cli_against_the_simulator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    text = SHIPPED.read_text().replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{state}"'
    )
    config_path = tmp_path / "config.toml"
    config_path.write_text(text)
    config = load_config(config_path)
    async with running_sim(config, scenario="nas-missing", speed=1.0) as sim:
        publish_endpoints(config, sim)
        code = await asyncio.to_thread(main, ["health", "--config", str(config_path), "--json"])
        data = json.loads(capsys.readouterr().out)
        assert code == 1 and not data["ok"]
        assert data["summary"] == ("8/8 online, all free; dgx7, dgx8: /mnt/nas not mounted")
        code = await asyncio.to_thread(
            main, ["health", "--config", str(config_path), "--cluster", "2nodes-dac"]
        )
        out = capsys.readouterr().out
        assert code == 0
        assert "2/2 online, all free" in out and "dgx1" in out and "dgx7" not in out


async def test_health_cli_shows_a_plug_switched_off_and_a_starved_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sparktui health` reads the plugs through Home Assistant: a node whose plug
    is off is powered_off, not unreachable; a node under memory it cannot give is
    starved, with its thrash evidence and the runbook's next step."""
    state = tmp_path / "state"
    text = SHIPPED.read_text().replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{state}"'
    ).replace("probe_timeout_s = 3.0", "probe_timeout_s = 2.0").replace(
        "connect_timeout_s = 10.0", f"connect_timeout_s = {CONNECT_TIMEOUT_S}")
    config_path = tmp_path / "config.toml"
    config_path.write_text(text)
    config = load_config(config_path)
    assert config.ssh.connect_timeout_s == CONNECT_TIMEOUT_S
    async with running_sim(config) as sim:
        publish_endpoints(config, sim)
        await sim.power("dgx7", False)
        sim.nodes["dgx6"].memory.set("hog", 125 * GIB)
        sim.notify()
        await sim.advance(30)
        code = await asyncio.to_thread(main, ["health", "--config", str(config_path), "--json"])
        data = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in data["nodes"]}
    assert code == 1
    assert nodes["dgx7"]["state"] == "powered_off"
    assert nodes["dgx6"]["state"] == "starved", nodes["dgx6"]
    assert nodes["dgx6"]["thrash"]["level"] in ("thrash suspected", "thrash")
    assert "plug cycle of dgx6 only" in nodes["dgx6"]["thrash"]["next_step"]
    assert "dgx7 powered_off" in data["summary"]
