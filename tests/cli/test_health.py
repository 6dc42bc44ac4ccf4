"""`sparktui health` rendering, verdicts and exit codes on built snapshots."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from rich.console import Console

from sparktui.cli.health_cmd import HealthReport
from sparktui.cli.main import main
from sparktui.core import nodehealth
from sparktui.core.config import (
    ClusterConfig,
    Config,
    ConsoleConfig,
    GuardConfig,
    HomeAssistantConfig,
    NodeConfig,
    SimulatorConfig,
)
from sparktui.core.state import (
    ClusterSnapshot,
    ContainerInfo,
    DiskFree,
    MemInfo,
    Mount,
    NodeSnapshot,
    NodeState,
    PathKind,
    ProbeResult,
    Psi,
    PsiLine,
)


def node_issues(config, snap):
    return [f.summary for f in nodehealth.node_findings(config, snap, snap.node)]


def kernel_verdict(config, kernel):
    found = nodehealth.kernel(config, "dgx1", kernel)
    return found.summary if found else ""

GIB = 1024 * 1024
NAMES = [f"dgx{i}" for i in range(1, 9)]


def make_config(tmp: Path = Path("/nonexistent")) -> Config:
    nodes = {
        n: NodeConfig(
            name=n,
            rank=i,
            host=n,
            user="op",
            ib_ip="10.0.0.1",
            switch=f"switch.{n}",
            role="test",
            hf_cache="/home/op/.cache/huggingface",
        )
        for i, n in enumerate(NAMES)
    }
    return Config(
        path=tmp / "config.toml",
        nodes=nodes,
        clusters={
            "8nodes-switch": ClusterConfig("8nodes-switch", tuple(NAMES)),
            "2nodes-dac": ClusterConfig("2nodes-dac", ("dgx1", "dgx2")),
        },
        switches={},
        nccl={},
        home_assistant=HomeAssistantConfig(url="http://127.0.0.1:1"),
        guards=GuardConfig(kernel_pin="6.17.0-1031", kernel_bad=("7.0.0-1019",)),
        simulator=SimulatorConfig(enabled=True),
        console=ConsoleConfig(state_dir=str(tmp / "state")),
    )


def healthy_probe(**kw: object) -> ProbeResult:
    fields: dict[str, object] = {
        "meminfo": MemInfo(127600748, 100 * GIB),
        "psi": Psi(PsiLine(0.5, 0, 0, 1), PsiLine(0.25, 0, 0, 1)),
        "kernel": "6.17.0-1031-nvidia",
        "mounts": (Mount("nas.lan:/sna", "/mnt/nas", "nfs4", "rw"),),
        "hf_cache": PathKind(
            "/home/op/.cache/huggingface", "symbolic link", "/mnt/nas/ai/huggingface"
        ),
        "docker_ok": True,
    }
    fields.update(kw)
    return ProbeResult(**fields)  # type: ignore[arg-type]


def online(name: str, **kw: object) -> NodeSnapshot:
    return NodeSnapshot(name, NodeState.ONLINE, 1.0, probe=healthy_probe(**kw), liveness=True)


def cluster(*snaps: NodeSnapshot) -> ClusterSnapshot:
    return ClusterSnapshot(1.0, snaps)


def render(report: HealthReport) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(report.table())
    return out.getvalue()


def test_all_online_and_free() -> None:
    report = HealthReport(make_config(), cluster(*(online(n) for n in NAMES)))
    assert report.summary() == "8/8 online, all free"
    assert report.healthy
    table = render(report)
    assert "6.17.0-1031-nvidia" in table and "free" in table
    assert "21.7/100.0" in table  # used / available GiB of a 121.7 GiB node


def test_busy_nodes_and_containers() -> None:
    running = ContainerInfo(
        "sparktui-glm53-r0",
        "img",
        "running",
        "Up 2 hours",
        MappingProxyType({"sparktui.lane": "glm53"}),
    )
    stale = ContainerInfo("old", "img", "exited", "Exited (137) 5 minutes ago")
    snaps = [online(n) for n in NAMES]
    snaps[0] = online("dgx1", containers=(running, stale))
    report = HealthReport(make_config(), cluster(*snaps))
    assert report.summary() == "8/8 online, 1 busy (dgx1)"
    assert report.healthy
    assert "sparktui-glm53-r0, +1 stopped" in render(report)
    data = report.as_json()
    assert data["nodes"][0]["busy"] is True
    assert data["nodes"][0]["containers"][0]["lane"] == "glm53"


def test_starved_and_powered_off_nodes_are_unhealthy() -> None:
    snaps = [online(n) for n in NAMES]
    snaps[5] = NodeSnapshot(
        "dgx6",
        NodeState.STARVED,
        1.0,
        error="dgx6: 'probe': shell did not answer",
        liveness=True,
        stalled=True,
    )
    snaps[6] = NodeSnapshot("dgx7", NodeState.POWERED_OFF, 1.0, error="x", powered=False)
    report = HealthReport(make_config(), cluster(*snaps))
    summary = report.summary()
    assert summary.startswith(
        "6/8 online (dgx6 starved, dgx7 powered_off), the online ones free; "
        "dgx6: thrash suspected (ping answers, SSH probe failed 1x in a row) -> SSH retry 1/3")
    assert "Home Assistant plug cycle of dgx6 only" in summary
    thrash = {n["node"]: n["thrash"] for n in report.as_json()["nodes"]}
    assert thrash["dgx6"]["level"] == "thrash suspected"
    assert thrash["dgx1"]["level"] == "ok" and thrash["dgx1"]["evidence"] == []
    assert not report.healthy
    assert report.issues["dgx6"] == ["starved: dgx6: 'probe': shell did not answer"]
    assert "starved" in render(report)


def test_seed_incidents_make_a_node_unhealthy() -> None:
    config = make_config()
    local_dir = healthy_probe(hf_cache=PathKind("/home/op/.cache/huggingface", "directory"))
    no_nas = healthy_probe(mounts=())
    bad_kernel = healthy_probe(kernel="7.0.0-1019-nvidia")
    no_docker = healthy_probe(docker_ok=False)
    snap = NodeSnapshot("dgx6", NodeState.ONLINE, 1.0)
    assert node_issues(config, replace(snap, probe=local_dir)) == [
        "HF cache /home/op/.cache/huggingface is a directory, not a symlink to "
        "/mnt/nas/ai/huggingface"
    ]
    assert node_issues(config, replace(snap, probe=no_nas)) == ["/mnt/nas not mounted"]
    assert node_issues(config, replace(snap, probe=bad_kernel)) == [
        "kernel 7.0.0-1019-nvidia is known bad (breaks NCCL/RoCE)"
    ]
    assert node_issues(config, replace(snap, probe=no_docker)) == ["docker not answering"]
    report = HealthReport(config, cluster(online("dgx5"), replace(snap, probe=no_nas)))
    assert report.summary() == "2/2 online, all free; dgx6: /mnt/nas not mounted"
    assert not report.healthy


def test_kernel_pin_matching() -> None:
    config = make_config()
    assert kernel_verdict(config, "6.17.0-1031-nvidia") == ""
    assert kernel_verdict(config, "6.17.0-1031") == ""
    assert kernel_verdict(config, "6.17.0-10310-nvidia") != ""
    assert "not the pinned" in kernel_verdict(config, "6.17.0-1030-nvidia")


def test_json_lists_every_column_key() -> None:
    report = HealthReport(make_config(), cluster(online("dgx1")))
    node = report.as_json()["nodes"][0]
    for key in (
        "node",
        "state",
        "kernel",
        "mem",
        "psi_full_avg10",
        "containers",
        "busy",
        "issues",
        "error",
        "liveness",
        "probe_latency_s",
        "problems",
    ):
        assert key in node
    assert node["mem"] == {"total_gib": 121.7, "used_gib": 21.7, "available_gib": 100.0}
    assert node["psi_full_avg10"] == 0.25


def test_simulator_not_running_exits_2_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = Path(__file__).resolve().parents[2] / "config.toml"
    text = shipped.read_text().replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{tmp_path}"'
    )
    config = tmp_path / "config.toml"
    config.write_text(text)
    code = main(["health", "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert "sparktui sim" in err and "endpoints.json" in err


def test_unknown_cluster_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = Path(__file__).resolve().parents[2] / "config.toml"
    code = main(["health", "--config", str(shipped), "--cluster", "nope"])
    assert code == 2
    assert "unknown cluster 'nope'" in capsys.readouterr().err


def test_json_output_is_one_object() -> None:
    report = HealthReport(make_config(), cluster(online("dgx1")))
    assert json.loads(json.dumps(report.as_json(), default=str))["ok"] is True


def test_a_nearly_full_disk_is_shown_but_does_not_refuse() -> None:
    root = DiskFree("/dev/nvme0n1p2", 3_905_109_820, 3_896_000_000, 5 * GIB, "/")
    snaps = [online(n) for n in NAMES]
    snaps[5] = online("dgx6", disks=(root,))
    report = HealthReport(make_config(), cluster(*snaps))
    assert report.healthy  # a warning: nothing would refuse a serve
    assert "dgx6: /: 5.0 GiB free" in report.summary()
    assert "/: 5.0 GiB free" in render(report)
    (found,) = report.as_json()["nodes"][5]["findings"]
    assert found["check"] == "disk" and not found["blocks_serve"]
