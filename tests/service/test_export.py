"""The sentinel's Prometheus view, without a cluster: events in, the text
format out (parsed back with prometheus_client's own parser), labels bounded
by the config and the recipes, workflow runs counted from the journal."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.adapters.exposition import ListenError, MetricsServer
from sparktui.core.config import Config, ConsoleConfig
from sparktui.core.config_load import load_config
from sparktui.core.listen import Listen, parse_listen
from sparktui.core.state import HistoryPoint, NodeSnapshot, NodeState
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.ops.journal import Journal
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    LaneChanged,
    LaneGone,
    NodeSampled,
)
from sparktui.service.export import FleetMetrics, label
from sparktui.service.lanes import LANE_STATES, LaneView

ROOT = Path(__file__).resolve().parents[2]
LANE = "glm53-flash-eugr-2x"


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


def config(tmp_path: Path) -> Config:
    base = load_config(ROOT / "config.toml")
    return dataclasses.replace(base, console=ConsoleConfig(state_dir=str(tmp_path / "state")))


def samples(metrics: FleetMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry()).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def sampled(node: str, state: NodeState, at: float, last_ok: float | None,
            level: ThrashLevel = ThrashLevel.OK, avail_kib: int | None = 50 << 20,
            psi_full: float | None = 1.5) -> NodeSampled:
    snap = NodeSnapshot(node, state, at, last_ok_at=last_ok)
    point = HistoryPoint(at, avail_kib, 120 << 20, 2.0, psi_full) \
        if state is NodeState.ONLINE else None
    return NodeSampled(snap, ThrashVerdict(node, level, (), "", 0), point)


def test_nodes_one_hot_memory_and_age_at_scrape_time(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    clock = Clock(1000.0)
    m = FleetMetrics(cfg, clock, lanes=[LANE])
    assert not any(name.startswith("sparktui_node_") for name, _ in samples(m))  # unpolled
    m.observe(sampled("dgx1", NodeState.ONLINE, 1000.0, 1000.0, ThrashLevel.PRESSURE))
    m.observe(sampled("dgx6", NodeState.STARVED, 1000.0, 940.0, ThrashLevel.THRASH))
    clock.t = 1010.0
    got = samples(m)
    assert got[("sparktui_node_up", (("node", "dgx1"),))] == 1.0
    assert got[("sparktui_node_up", (("node", "dgx6"),))] == 0.0
    for s in NodeState:
        assert got[("sparktui_node_state", (("node", "dgx6"), ("state", s.value)))] == (
            1.0 if s is NodeState.STARVED else 0.0)
    assert got[("sparktui_node_mem_available_bytes", (("node", "dgx1"),))] == (50 << 20) * 1024
    assert ("sparktui_node_mem_available_bytes", (("node", "dgx6"),)) not in got  # unknown
    assert got[("sparktui_node_psi_full_avg10", (("node", "dgx1"),))] == 1.5
    assert got[("sparktui_node_thrash_level", (("node", "dgx6"),))] == 3.0
    assert got[("sparktui_node_sample_age_seconds", (("node", "dgx1"),))] == 10.0
    assert got[("sparktui_node_sample_age_seconds", (("node", "dgx6"),))] == 70.0
    m.observe(sampled("dgx99", NodeState.ONLINE, 1010.0, 1010.0))  # not in the config
    assert not any(dict(labels).get("node") == "dgx99" for _, labels in samples(m))


def test_lanes_bounded_by_the_recipes_and_gone_when_the_lane_is(tmp_path: Path) -> None:
    m = FleetMetrics(config(tmp_path), Clock(0.0), lanes=[LANE])
    view = LaneView(LANE, "2nodes", "vllm", 8000, (), phase="loading weights",
                    decode_tps=None, gate="")
    m.observe(LaneChanged(view))
    m.observe(LaneChanged(dataclasses.replace(view, name="somebody-elses-container")))
    got = samples(m)
    lanes = {dict(labels).get("lane") for _, labels in got} - {None}
    assert lanes == {LANE}
    assert got[("sparktui_lane_state", (("lane", LANE), ("state", "loading_weights")))] == 1.0
    assert sum(v for (n, labels), v in got.items() if n == "sparktui_lane_state") == 1.0
    assert {dict(labels)["state"] for n, labels in got if n == "sparktui_lane_state"} == {
        label(s) for s in LANE_STATES}
    assert got[("sparktui_lane_qualified", (("lane", LANE),))] == 0.0
    m.observe(LaneChanged(dataclasses.replace(view, phase="serving", decode_tps=31.5,
                                              canary_s=0.42, gate="qualified")))
    got = samples(m)
    assert got[("sparktui_lane_state", (("lane", LANE), ("state", "serving")))] == 1.0
    assert got[("sparktui_lane_decode_tokens_per_second", (("lane", LANE),))] == 31.5
    assert got[("sparktui_lane_canary_seconds", (("lane", LANE),))] == 0.42
    assert got[("sparktui_lane_qualified", (("lane", LANE),))] == 1.0
    m.observe(LaneGone(LANE))
    assert not any(dict(labels).get("lane") for _, labels in samples(m))


def test_alerts_by_severity(tmp_path: Path) -> None:
    m = FleetMetrics(config(tmp_path), Clock(0.0), lanes=[])
    m.observe(AlertRaised(Alert("thrash:dgx6", "thrash", "dgx6", (), "")))
    m.observe(AlertRaised(Alert("thrash:dgx7", "thrash suspected", "dgx7", (), "")))
    m.observe(AlertRaised(Alert("thrash:dgx6", "thrash", "dgx6", ("fresher",), "")))  # same key
    m.observe(AlertRaised(Alert("x:y", "something new", "y", (), "")))
    got = samples(m)
    assert got[("sparktui_alerts_active", (("severity", "thrash"),))] == 1.0
    assert got[("sparktui_alerts_active", (("severity", "thrash_suspected"),))] == 1.0
    assert got[("sparktui_alerts_active", (("severity", "fatal"),))] == 0.0
    assert got[("sparktui_alerts_active", (("severity", "other"),))] == 1.0
    m.observe(AlertCleared("thrash:dgx6"))
    assert samples(m)[("sparktui_alerts_active", (("severity", "thrash"),))] == 0.0


def test_workflow_runs_counted_from_the_journal_incrementally(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    journal = Journal.in_state_dir(cfg.state_dir(), Clock(100.0))  # type: ignore[arg-type]
    m = FleetMetrics(cfg, Clock(0.0), lanes=[])

    def runs() -> dict[tuple[str, str], float]:
        return {(dict(labels)["workflow"], dict(labels)["outcome"]): v
                for (n, labels), v in samples(m).items() if n == "sparktui_workflow_runs_total"}

    assert runs() == {}
    journal.append("w1", "begin", workflow="serve", target=LANE)
    journal.append("w1", "end", workflow="serve", target=LANE, ok=True, message="done")
    journal.append("w2", "begin", workflow="power-cycle", target="dgx5")
    journal.append("w2", "refused", workflow="power-cycle", target="dgx5", message="protected")
    journal.append("w2", "end", workflow="power-cycle", target="dgx5", ok=False, message="x")
    assert runs() == {("serve", "ok"): 1, ("power-cycle", "refused"): 1}
    journal.append("w3", "end", workflow="serve", target=LANE, ok=False, message="failed")
    with open(journal.path, "ab") as f:  # a line still being written is not read yet
        f.write(json.dumps({"t": 1, "wf": "w4", "kind": "end", "workflow": "stop",
                            "ok": True}).encode()[:20])
    assert runs() == {("serve", "ok"): 1, ("serve", "failed"): 1, ("power-cycle", "refused"): 1}
    with open(journal.path, "ab") as f:
        f.write(b"\n" + json.dumps({"t": 1, "wf": "w5", "kind": "end",
                                    "workflow": "Bad Kind {x}", "ok": True}).encode() + b"\n")
    assert runs()[("other", "ok")] == 1  # a torn line is skipped, a foreign kind is bounded
    fresh = journal.path.with_name("fresh.jsonl")  # the journal replaced: counted anew
    fresh.write_text(json.dumps({"t": 1, "wf": "w6", "kind": "end", "workflow": "stop",
                                 "ok": True}) + "\n")
    fresh.replace(journal.path)
    assert runs() == {("stop", "ok"): 1}


async def test_the_server_serves_metrics_and_nothing_else(tmp_path: Path) -> None:
    m = FleetMetrics(config(tmp_path), Clock(0.0), lanes=[])
    m.observe(AlertRaised(Alert("thrash:dgx6", "thrash", "dgx6", (), "")))
    server = MetricsServer(Listen("127.0.0.1", 0), m.registry())
    await server.start()
    try:
        port = server.address.port
        assert port != 0
        async with httpx.AsyncClient(timeout=5) as client:
            r = await client.get(f"http://127.0.0.1:{port}/metrics")
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/plain")
            assert 'sparktui_alerts_active{severity="thrash"} 1.0' in r.text
            assert "process_cpu_seconds_total" not in r.text  # the fleet, not the sentinel
            assert (await client.get(f"http://127.0.0.1:{port}/")).status_code == 404
        taken = MetricsServer(parse_listen(f"127.0.0.1:{port}"), m.registry())
        with pytest.raises(ListenError, match=rf"cannot listen on 127.0.0.1:{port} for /metrics"):
            await taken.start()
    finally:
        await server.close()
    await asyncio.sleep(0)


def test_no_escape_byte_reaches_the_sentinels_output() -> None:
    from sparktui.service.sentinel import line_writer
    out: list[str] = []
    emit = line_writer(True, Clock(0.0), out.append)  # type: ignore[arg-type]
    emit(3, "ALERT fatal lane: \x1b[1;36m(APIServer pid=1)\x1b[0;0m ERROR x\r\n\x1b]0;t\x07")
    assert out == ["<3>ALERT fatal lane: (APIServer pid=1) ERROR x "]
    assert not any(ord(c) < 0x20 for c in out[0])
