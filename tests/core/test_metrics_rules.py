"""The shipped Prometheus rules, their promtool tests and the Grafana dashboard:
the files under deploy/ are what `sparktui export-rules` makes from the shipped
config, promtool (a real part: Debian's prometheus package, which .ci/run
installs) accepts the rules and passes their tests, every rule quotes the
console's next step, and every metric they name is one the sentinel exports."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sparktui.cli.export_rules_cmd import files
from sparktui.cli.main import main
from sparktui.core.advice import (
    SENTINEL_UNIT,
    STALE_NEXT,
    UNRESPONSIVE_NEXT,
    thrash_next_step,
)
from sparktui.core.config_load import load_config
from sparktui.core.metrics_rules import RULES_FILE, RULES_TEST_FILE, rules
from sparktui.core.state import NodeSnapshot, NodeState
from sparktui.service import export
from sparktui.service.attach import lost_alert
from sparktui.service.events import NodeSampled
from sparktui.service.sentinel import EventLines

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing: .ci/run installs Debian's prometheus package")
        pytest.skip("promtool is not installed (.ci/run installs Debian's prometheus)")
    return found


def test_the_shipped_files_are_what_export_rules_makes() -> None:
    config = load_config(ROOT / "config.toml")
    for name, text in files(config.thrash).items():
        assert (DEPLOY / name).read_text(encoding="utf-8") == text, (
            f"deploy/{name} is out of date: run `sparktui export-rules --out deploy`")


def test_promtool_checks_and_tests_the_rules(tmp_path: Path) -> None:
    tool = promtool()
    for name in (RULES_FILE, RULES_TEST_FILE):
        (tmp_path / Path(name).name).write_text((DEPLOY / name).read_text())
    checked = subprocess.run([tool, "check", "rules", Path(RULES_FILE).name], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules(load_config(ROOT / 'config.toml').thrash))} rules found" \
        in checked.stdout
    tested = subprocess.run([tool, "test", "rules", Path(RULES_TEST_FILE).name], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # and the tests can fail: a runbook that no longer says the console's words
    broken = (tmp_path / Path(RULES_TEST_FILE).name)
    broken.write_text(broken.read_text().replace("reduce load now", "reduce load later"))
    failed = subprocess.run([tool, "test", "rules", broken.name], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert failed.returncode != 0


ISSUE_METRICS = {  # issue 30's names, each with its labels beside the node or lane
    "sparktui_node_up": set(), "sparktui_node_state": {"state"},
    "sparktui_node_mem_available_bytes": set(), "sparktui_node_psi_full_avg10": set(),
    "sparktui_node_thrash_level": set(), "sparktui_node_sample_age_seconds": set(),
    "sparktui_lane_state": {"state"}, "sparktui_lane_decode_tokens_per_second": set(),
    "sparktui_lane_canary_seconds": set(), "sparktui_lane_qualified": set(),
    "sparktui_alerts_active": {"severity"}, "sparktui_workflow_runs_total": {"workflow",
                                                                              "outcome"}}


def scraped(tmp_path: Path) -> dict[str, list[dict[str, str]]]:
    """What a scrape of a sentinel that saw a node, a lane, an alert and a
    workflow returns: each sample name with the label sets it has."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from sparktui.core.config import ConsoleConfig
    from sparktui.core.state import HistoryPoint
    from sparktui.core.thrash import ThrashLevel, ThrashVerdict
    from sparktui.ops.journal import Journal
    from sparktui.service.events import Alert, AlertRaised, LaneChanged
    from sparktui.service.lanes import LaneView

    class Clock:
        def time(self) -> float:
            return 100.0

        def monotonic(self) -> float:
            return 100.0

    config = dataclasses.replace(load_config(ROOT / "config.toml"),
                                 console=ConsoleConfig(state_dir=str(tmp_path / "state")))
    journal = Journal.in_state_dir(config.state_dir(), Clock())  # type: ignore[arg-type]
    journal.append("w1", "begin", workflow="serve", target="x")
    journal.append("w1", "end", workflow="serve", target="x", ok=True, message="done")
    m = export.FleetMetrics(config, Clock(), lanes=["x"])  # type: ignore[arg-type]
    m.observe(NodeSampled(NodeSnapshot("dgx1", NodeState.ONLINE, 100.0, last_ok_at=99.0),
                          ThrashVerdict("dgx1", ThrashLevel.OK, (), "", 0),
                          HistoryPoint(100.0, 50 << 20, 120 << 20, 2.0, 1.5)))
    m.observe(LaneChanged(LaneView("x", "2nodes-dac", "vllm", 8000, (), phase="serving",
                                   decode_tps=30.0, canary_s=0.2, gate="qualified")))
    m.observe(AlertRaised(Alert("thrash:dgx1", "thrash", "dgx1", (), "")))
    out: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(generate_latest(m.registry()).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(dict(sample.labels))
    return out


def test_every_rule_names_exported_metrics_and_the_consoles_next_step(tmp_path: Path) -> None:
    exported = scraped(tmp_path)
    for name, labels in ISSUE_METRICS.items():
        assert name in exported, f"{name} is not exported"
        assert {k for d in exported[name] for k in d} - {"node", "lane"} == labels, name
    thrash = load_config(ROOT / "config.toml").thrash
    for rule in rules(thrash):
        for metric, matchers in re.findall(r"(sparktui_[a-z0-9_]+)(?:\{([^}]*)\})?", rule.expr):
            assert metric in exported, f"{rule.name} uses {metric}, which is not exported"
            for key, value in re.findall(r'(\w+)="([^"]*)"', matchers):  # a value it can have
                assert any(d.get(key) == value for d in exported[metric]), (rule.name, value)
        assert rule.runbook
    by = {r.name: r for r in rules(thrash)}
    assert by["SparktuiNodeThrash"].runbook == thrash_next_step(thrash.ssh_retries,
                                                                thrash.ssh_retry_interval_s)
    assert by["SparktuiLaneUnresponsive"].runbook == UNRESPONSIVE_NEXT
    assert by["SparktuiSentinelDown"].expr.startswith("absent(")
    # the dead sentinel and the stale node: the words a console and the sentinel say
    lost = lost_alert(None, "answered no attach", polls=False)
    assert lost.next_step.startswith(by["SparktuiSentinelDown"].runbook)
    assert f"restart {SENTINEL_UNIT}" in by["SparktuiSentinelDown"].runbook
    assert by["SparktuiNodeStale"].runbook == STALE_NEXT
    stale = EventLines(2.0).lines(NodeSampled(NodeSnapshot("dgx3", NodeState.STARVED, 10.0,
                                                           last_ok_at=1.0), None, None))
    assert stale[-1][1].endswith(f"-> {STALE_NEXT}")
    dashboard = json.loads((DEPLOY / "grafana" / "sparktui-dashboard.json").read_text())
    shown: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for metric in re.findall(r"sparktui_[a-z0-9_]+", target["expr"]):
                assert metric in exported, f"panel {panel['title']!r} uses {metric}"
                shown.add(metric)
    assert shown == set(ISSUE_METRICS)  # and it shows every one


def test_export_rules_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = ["--config", str(ROOT / "config.toml")]
    assert main([*cfg, "export-rules"]) == 0
    assert capsys.readouterr().out == (DEPLOY / RULES_FILE).read_text()
    assert main([*cfg, "export-rules", "--dashboard"]) == 0
    assert json.loads(capsys.readouterr().out)["uid"] == "sparktui-fleet"
    assert main([*cfg, "export-rules", "--out", str(tmp_path / "out")]) == 0
    written = (tmp_path / "out" / RULES_TEST_FILE).read_text()
    assert written == (DEPLOY / RULES_TEST_FILE).read_text()
    (tmp_path / "file").write_text("")
    assert main([*cfg, "export-rules", "--out", str(tmp_path / "file")]) == 2
    assert "--out: " in capsys.readouterr().err
