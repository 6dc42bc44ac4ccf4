"""What the console learns from the gate and the OOM prediction: the lane's gate
state on its view, a garbled lane or a predicted OOM as an alert with the
evidence and the next step, cleared when the lane qualifies."""

from __future__ import annotations

from pathlib import Path

from sparktui.core.config_load import load_config
from sparktui.ops.events import StepProgressed, WorkflowFinished
from sparktui.ops.workflows.qualify import lane_news
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertCleared, AlertRaised

ROOT = Path(__file__).resolve().parents[2]
LANE = "glm53-flash-eugr-2x"


def finished(state: str, reasons: list[str]) -> WorkflowFinished:
    return WorkflowFinished("wf", 0.0, "qualify", LANE, state == "qualified", "m",
                            {"qualify": {"state": state, "summary": f"quality gate: {state}",
                                         "reasons": reasons}})


def test_gate_and_oom_news_from_workflow_events():
    news = lane_news(finished("garbled", ["RU: CER 1.55 % > 0.30 %"]))
    assert news is not None and news.alarming
    assert (news.subject, news.state, news.evidence) == (LANE, "garbled",
                                                         ("RU: CER 1.55 % > 0.30 %",))
    assert "off production" in news.next_step
    oom = lane_news(StepProgressed("wf", 0.0, "predicted oom", "dgx7",
                                   "dgx7 runs out at shard 118/141 in ~6 min (...) -> stop it"))
    assert oom is not None and oom.alarming and oom.subject == "dgx7"
    assert oom.next_step == "stop it"
    assert lane_news(StepProgressed("wf", 0.0, "readiness", LANE, "loading")) is None
    assert not lane_news(finished("qualified", [])).alarming


def test_the_service_raises_and_clears_the_gate_alert(tmp_path):
    config = load_config(ROOT / "config.toml")
    service = ClusterService(config, recipes={}, state_dir=tmp_path)
    seen: list[object] = []
    service._sink = seen.append
    service._workflow_event(finished("garbled", ["RU: CER 1.55 % > 0.30 %"]))
    raised = [e for e in seen if isinstance(e, AlertRaised)]
    assert raised and raised[0].alert.key == f"gate:{LANE}"
    assert raised[0].alert.level == "garbled"
    service._workflow_event(finished("qualified", []))
    assert any(isinstance(e, AlertCleared) and e.key == f"gate:{LANE}" for e in seen)
