"""The Prometheus alert rules, their promtool unit tests and the Grafana
dashboard that ship with the product (`sparktui export-rules`; the files
under deploy/), made from the same metric names as service/export.py and
the same next steps as the console (core/advice.py), so a page from
Alertmanager tells the operator what the console would.

Rendered as text here (no YAML library): every string goes out as a JSON
string, which is a valid YAML double-quoted scalar, and the dashboard is JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sparktui.core.advice import (
    PRESSURE_NEXT,
    SENTINEL_DOWN_NEXT,
    STALE_NEXT,
    UNRESPONSIVE_NEXT,
    cycle_next_step,
    fatal_next_step,
    thrash_next_step,
)
from sparktui.core.config import ThrashConfig
from sparktui.core.logsig import Kind

RULES_FILE = "prometheus/sparktui-rules.yml"
RULES_TEST_FILE = "prometheus/sparktui-rules.test.yml"
DASHBOARD_FILE = "grafana/sparktui-dashboard.json"
STALE_AFTER_S = 120
"""A node whose probe has not come back for this long is stale (the sentinel
says so on its own line after two poll intervals; the rule waits longer so a
slow node under a loaded host does not page)."""


@dataclass(frozen=True)
class Rule:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    runbook: str
    """The next step, as the console's alert says it."""


def rules(thrash: ThrashConfig) -> tuple[Rule, ...]:
    node = "{{ $labels.node }}"
    lane = "{{ $labels.lane }}"
    return (
        Rule("SparktuiNodeThrash", "sparktui_node_thrash_level >= 3", "0s", "critical",
             f"{node} is thrashing (memory PSI full, MemAvailable near zero)",
             thrash_next_step(thrash.ssh_retries, thrash.ssh_retry_interval_s)),
        Rule("SparktuiNodeThrashSuspected", "sparktui_node_thrash_level == 2", "1m", "warning",
             f"{node}: thrash suspected (memory pressure with engine or kernel evidence)",
             thrash_next_step(thrash.ssh_retries, thrash.ssh_retry_interval_s)),
        Rule("SparktuiNodeMemoryPressure", "sparktui_node_thrash_level == 1", "10m", "info",
             f"{node} has been under memory pressure for 10 minutes", PRESSURE_NEXT),
        Rule("SparktuiNodeStarved", 'sparktui_node_state{state="starved"} == 1', "1m",
             "critical", f"{node} answers ping but not SSH (the OOM-thrash signature)",
             cycle_next_step(thrash.ssh_retries, node)),
        Rule("SparktuiLaneUnresponsive", 'sparktui_lane_state{state="unresponsive"} == 1',
             "0s", "critical", f"lane {lane} answers /health but no longer generates",
             UNRESPONSIVE_NEXT),
        Rule("SparktuiLaneFailed", 'sparktui_lane_state{state="failed"} == 1', "0s",
             "critical", f"lane {lane} failed (a fatal line or an exited rank)",
             fatal_next_step(Kind.ENGINE_DEAD, 0)),
        Rule("SparktuiNodeStale", f"sparktui_node_sample_age_seconds > {STALE_AFTER_S} unless on "
             '(node) sparktui_node_state{state="powered_off"} == 1', "1m",
             "warning", f"{node}: no probe answer for over {STALE_AFTER_S} s", STALE_NEXT),
        Rule("SparktuiNodeNeverAnswered", "sparktui_node_up == 0 unless on (node) "
             '(sparktui_node_state{state="powered_off"} == 1 or '
             'sparktui_node_state{state="starved"} == 1 or '  # the starved rule says it
             "sparktui_node_sample_age_seconds)", "3m", "warning",
             f"{node} has not answered since the sentinel started (no sample to be stale)",
             STALE_NEXT),
        Rule("SparktuiSentinelDown", "absent(sparktui_node_up)", "5m", "critical",
             "the sparktui sentinel exports nothing: the night is not watched",
             SENTINEL_DOWN_NEXT),
    )


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def rules_yaml(thrash: ThrashConfig) -> str:
    lines = ["# Prometheus alert rules for the sparktui sentinel's /metrics",
             "# (written by `sparktui export-rules`; load with rule_files:).",
             "groups:", "  - name: sparktui", "    rules:"]
    for r in rules(thrash):
        lines += [f"      - alert: {r.name}",
                  f"        expr: {_q(r.expr)}",
                  f"        for: {r.for_}",
                  "        labels:",
                  f"          severity: {r.severity}",
                  "        annotations:",
                  f"          summary: {_q(r.summary)}",
                  f"          runbook: {_q(r.runbook)}"]
    return "\n".join(lines) + "\n"


def _render(template: str, labels: dict[str, str]) -> str:
    for key, value in labels.items():
        template = template.replace("{{ $labels." + key + " }}", value)
    return template


def rules_test_yaml(thrash: ThrashConfig) -> str:
    """promtool unit tests: each rule fires on the series that should raise it,
    with its annotations as rendered, and not before its ``for``."""
    by_name = {r.name: r for r in rules(thrash)}
    cases: list[tuple[str, str, str, str | None, str, dict[str, str]]] = [
        # (rule, series, values, quiet until, fires at, labels)
        ("SparktuiNodeThrash", 'sparktui_node_thrash_level{node="dgx6"}', "0 3 3", "0m", "1m",
         {"node": "dgx6"}),
        ("SparktuiNodeThrashSuspected", 'sparktui_node_thrash_level{node="dgx7"}',
         "2 2 2 2", "0m", "2m", {"node": "dgx7"}),
        ("SparktuiNodeMemoryPressure", 'sparktui_node_thrash_level{node="dgx5"}',
         "1x15", "5m", "11m", {"node": "dgx5"}),
        ("SparktuiNodeStarved", 'sparktui_node_state{node="dgx6",state="starved"}',
         "1 1 1", "0m", "2m", {"node": "dgx6", "state": "starved"}),
        ("SparktuiLaneUnresponsive",
         'sparktui_lane_state{lane="glm53-flash-eugr-2x",state="unresponsive"}', "0 1",
         "0m", "1m", {"lane": "glm53-flash-eugr-2x", "state": "unresponsive"}),
        ("SparktuiLaneFailed", 'sparktui_lane_state{lane="glm53-flash-eugr-2x",state="failed"}',
         "1", None, "0m", {"lane": "glm53-flash-eugr-2x", "state": "failed"}),
        ("SparktuiNodeStale", 'sparktui_node_sample_age_seconds{node="dgx3"}',
         "10 200 260 320", "1m", "3m", {"node": "dgx3"}),
        ("SparktuiNodeNeverAnswered", 'sparktui_node_up{node="dgx2"}', "0x5", "2m", "4m",
         {"node": "dgx2"}),
    ]
    lines = ["# promtool test rules: the shipped rules against series that must raise them",
             "# (written by `sparktui export-rules`).",
             f"rule_files: [{_q(RULES_FILE.rsplit('/', 1)[1])}]",
             "evaluation_interval: 1m", "tests:"]
    for name, series, values, quiet, at, labels in cases:
        rule = by_name[name]
        lines += ["  - interval: 1m",
                  "    input_series:",
                  f"      - series: {_q(series)}",
                  f"        values: {_q(values)}",
                  "    alert_rule_test:"]
        if quiet is not None:
            lines += [f"      - eval_time: {quiet}", f"        alertname: {name}",
                      "        exp_alerts: []"]
        lines += [f"      - eval_time: {at}", f"        alertname: {name}", "        exp_alerts:"]
        lines += _expected(rule, {**labels, "severity": rule.severity})
    age, off = ('sparktui_node_sample_age_seconds{node="dgx4"}',
                'sparktui_node_state{node="dgx4",state="powered_off"}')
    # a node down that answered once is stale (the rule above), not never-answered
    once = 'sparktui_node_up{node="dgx3"}'
    lines += ["  - interval: 1m",
              "    input_series:",
              f"      - series: {_q(once)}",
              f"        values: {_q('0x5')}",
              f"      - series: {_q(age.replace('dgx4', 'dgx3'))}",
              f"        values: {_q('10 70 130 190 250 310')}",
              "    alert_rule_test:",
              "      - eval_time: 4m",
              "        alertname: SparktuiNodeNeverAnswered",
              "        exp_alerts: []"]
    # nor is a node switched off
    lines += ["  - interval: 1m",
              "    input_series:",
              f"      - series: {_q(once.replace('dgx3', 'dgx7'))}",
              f"        values: {_q('0x5')}",
              f"      - series: {_q(off.replace('dgx4', 'dgx7'))}",
              f"        values: {_q('1x5')}",
              "    alert_rule_test:",
              "      - eval_time: 4m",
              "        alertname: SparktuiNodeNeverAnswered",
              "        exp_alerts: []"]
    # a node switched off (its plug says so) is not stale: its state is known
    lines += ["  - interval: 1m",
              "    input_series:",
              f"      - series: {_q(age)}",
              f"        values: {_q('10 200 260 320 380')}",
              f"      - series: {_q(off)}",
              f"        values: {_q('0 1 1 1 1')}",
              "    alert_rule_test:",
              "      - eval_time: 4m",
              "        alertname: SparktuiNodeStale",
              "        exp_alerts: []"]
    # the sentinel gone: nothing exported for five minutes
    down = by_name["SparktuiSentinelDown"]
    up_series = 'sparktui_node_up{node="dgx1"}'
    lines += ["  - interval: 1m",
              "    input_series:",
              f"      - series: {_q(up_series)}",
              f"        values: {_q('1 1 stale')}",
              "    alert_rule_test:",
              "      - eval_time: 1m",
              "        alertname: SparktuiSentinelDown",
              "        exp_alerts: []",
              "      - eval_time: 8m",
              "        alertname: SparktuiSentinelDown",
              "        exp_alerts:"]
    lines += _expected(down, {"severity": down.severity})
    return "\n".join(lines) + "\n"


def _expected(rule: Rule, labels: dict[str, str]) -> list[str]:
    out = ["          - exp_labels:"]
    out += [f"              {k}: {_q(v)}" for k, v in labels.items()]
    out += ["            exp_annotations:",
            f"              summary: {_q(_render(rule.summary, labels))}",
            f"              runbook: {_q(_render(rule.runbook, labels))}"]
    return out


def dashboard_json() -> str:
    """A Grafana dashboard over the exported metrics (datasource chosen at import)."""
    ds = {"type": "prometheus", "uid": "${datasource}"}
    panels: list[dict[str, object]] = []

    def panel(title: str, kind: str, expr: str, legend: str, x: int, y: int, w: int = 12,
              h: int = 8, unit: str = "short") -> None:
        panels.append({
            "id": len(panels) + 1, "title": title, "type": kind, "datasource": ds,
            "gridPos": {"x": x, "y": y, "w": w, "h": h},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": "A", "datasource": ds, "expr": expr,
                         "legendFormat": legend}],
        })

    panel("Nodes online", "stat", "sum(sparktui_node_up)", "online", 0, 0, 6, 4)
    panel("Active alerts", "stat", "sum by (severity) (sparktui_alerts_active)", "{{severity}}",
          6, 0, 18, 4)
    panel("Node state", "table", "sparktui_node_state == 1", "{{node}} {{state}}", 0, 4)
    panel("Thrash level (0 ok .. 3 thrash)", "timeseries", "sparktui_node_thrash_level",
          "{{node}}", 12, 4)
    panel("MemAvailable", "timeseries", "sparktui_node_mem_available_bytes", "{{node}}", 0, 12,
          unit="bytes")
    panel("Memory PSI full avg10", "timeseries", "sparktui_node_psi_full_avg10", "{{node}}",
          12, 12, unit="percent")
    panel("Sample age", "timeseries", "sparktui_node_sample_age_seconds", "{{node}}", 0, 20,
          unit="s")
    panel("Lane state", "table", "sparktui_lane_state == 1", "{{lane}} {{state}}", 12, 20)
    panel("Decode tokens/s", "timeseries", "sparktui_lane_decode_tokens_per_second", "{{lane}}",
          0, 28)
    panel("Canary time to first token", "timeseries", "sparktui_lane_canary_seconds",
          "{{lane}}", 12, 28, unit="s")
    panel("Lanes qualified (quality gate)", "stat", "sparktui_lane_qualified", "{{lane}}",
          0, 36, 6)
    panel("Workflows", "timeseries", "increase(sparktui_workflow_runs_total[1h])",
          "{{workflow}} {{outcome}}", 6, 36, 18)
    dashboard = {
        "title": "sparktui: DGX Spark fleet", "uid": "sparktui-fleet", "schemaVersion": 39,
        "version": 1, "editable": True, "refresh": "30s", "tags": ["sparktui"],
        "time": {"from": "now-12h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource",
                                 "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
    }
    return json.dumps(dashboard, indent=2) + "\n"
