"""Endpoint resolution from config and from the simulator's endpoints file."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.adapters.endpoints import EndpointError, resolve_endpoints, sim_endpoints_path
from sparktui.core.config import (
    Config,
    ConsoleConfig,
    HomeAssistantConfig,
    LivenessConfig,
    NodeConfig,
    SimulatorConfig,
    SshConfig,
)


def make_config(tmp: Path, *, sim: bool) -> Config:
    nodes = {
        n: NodeConfig(
            n,
            i,
            f"{n}.lan",
            "kilork",
            "10.0.0.1",
            f"switch.{n}",
            "test",
            port=2222,
            liveness_port=9,
        )
        for i, n in enumerate(["dgx1", "dgx2"])
    }
    return Config(
        path=tmp / "config.toml",
        nodes=nodes,
        clusters={},
        switches={},
        nccl={},
        home_assistant=HomeAssistantConfig(url="http://127.0.0.1:8123", token_file="~/tok"),
        ssh=SshConfig(known_hosts="~/.ssh/kh", client_keys=("~/.ssh/id_x",)),
        liveness=LivenessConfig(method="icmp"),
        console=ConsoleConfig(state_dir=str(tmp / "state")),
        simulator=SimulatorConfig(enabled=sim),
    )


def sim_file(config: Config, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "nodes": {
            "dgx1": {
                "host": "127.0.0.1",
                "port": 40001,
                "liveness_port": 40101,
                "api_host": "127.0.1.1",
            },
            "dgx2": {
                "host": "127.0.0.1",
                "port": 40002,
                "liveness_port": 40102,
                "api_host": "127.0.2.1",
            },
        },
        "ha_url": "http://127.0.0.1:40200",
        "ha_token_file": "/tmp/sim/ha_token",
        "client_key": "/tmp/sim/client_key",
        "known_hosts": "/tmp/sim/known_hosts",
        "pid": os.getpid(),
    }
    data.update(overrides)
    path = sim_endpoints_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return data


def test_from_config() -> None:
    eps = resolve_endpoints(make_config(Path("/x"), sim=False))
    ep = eps.node("dgx2")
    assert (ep.ssh_host, ep.ssh_port, ep.username) == ("dgx2.lan", 2222, "kilork")
    assert ep.known_hosts == str(Path("~/.ssh/kh").expanduser())
    assert ep.client_keys == (str(Path("~/.ssh/id_x").expanduser()),)
    assert ep.ssh_config == (str(Path("~/.ssh/config").expanduser()),)
    assert (ep.liveness_method, ep.liveness_host, ep.api_host) == ("icmp", "dgx2.lan", "dgx2.lan")
    assert not eps.simulated and eps.ha_url == "http://127.0.0.1:8123"
    with pytest.raises(EndpointError):
        eps.node("dgx9")


def test_from_simulator(tmp_path: Path) -> None:
    config = make_config(tmp_path, sim=True)
    sim_file(config)
    eps = resolve_endpoints(config)
    ep = eps.node("dgx2")
    assert (ep.ssh_host, ep.ssh_port, ep.api_host) == ("127.0.0.1", 40002, "127.0.2.1")
    assert (ep.liveness_method, ep.liveness_host, ep.liveness_port) == ("tcp", "127.0.2.1", 40102)
    assert ep.known_hosts == "/tmp/sim/known_hosts" and ep.client_keys == ("/tmp/sim/client_key",)
    assert ep.ssh_config == ()  # the operator's ~/.ssh/config never applies to the simulator
    assert eps.simulated and eps.ha_token_file == "/tmp/sim/ha_token"


def test_simulator_not_running(tmp_path: Path) -> None:
    with pytest.raises(EndpointError, match="not running; start it with `sparktui sim"):
        resolve_endpoints(make_config(tmp_path, sim=True))


def test_stale_endpoints_file(tmp_path: Path) -> None:
    config = make_config(tmp_path, sim=True)
    sim_file(config, pid=2**22 + 12345)
    with pytest.raises(EndpointError, match="stale"):
        resolve_endpoints(config)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"host": "192.168.88.11"}, "not a loopback address"),
        ({"api_host": "10.0.0.1"}, "not a loopback address"),
        ({"port": "22"}, "not a port number"),
        ({"liveness_port": 0}, "not a port number"),
    ],
)
def test_bad_node_entries(tmp_path: Path, change: dict[str, object], message: str) -> None:
    config = make_config(tmp_path, sim=True)
    data = sim_file(config)
    nodes = data["nodes"]
    assert isinstance(nodes, dict)
    nodes["dgx1"] = {**nodes["dgx1"], **change}
    sim_file(config, nodes=nodes)
    with pytest.raises(EndpointError, match=message):
        resolve_endpoints(config)


def test_missing_node_or_non_loopback_ha(tmp_path: Path) -> None:
    config = make_config(tmp_path, sim=True)
    sim_file(config, nodes={"dgx1": {"host": "127.0.0.1", "port": 1, "liveness_port": 2}})
    with pytest.raises(EndpointError, match=r"nodes\.dgx2: missing"):
        resolve_endpoints(config)
    sim_file(config, ha_url="http://192.168.88.5:8123")
    with pytest.raises(EndpointError, match="ha_url"):
        resolve_endpoints(config)
    config2 = replace(config, simulator=SimulatorConfig(enabled=True))
    sim_endpoints_path(config2).write_text("{not json")
    with pytest.raises(EndpointError, match="unreadable"):
        resolve_endpoints(config2)


def test_the_simulator_file_round_trips_through_its_one_definition():
    from sparktui.adapters.endpoints import SimEndpointsFile, SimNodeEntry

    sim = SimEndpointsFile({"dgx1": SimNodeEntry("127.0.0.1", 40001, 40101, "127.0.1.1")},
                           "http://127.0.0.1:8123", "/t/tok", "/t/key", "/t/kh", 42)
    assert SimEndpointsFile.parse(sim.to_json(), "x") == sim
    bad = sim.to_json()
    bad["nodes"]["dgx1"]["api_host"] = "10.0.0.5"
    with pytest.raises(EndpointError, match=r"nodes\.dgx1: '10\.0\.0\.5' is not a loopback"):
        SimEndpointsFile.parse(bad, "x")
