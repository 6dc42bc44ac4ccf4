"""The confirmation rule and the progress lines the CLI prints."""

from __future__ import annotations

from sparktui.ops.confirm import confirmation_for
from sparktui.ops.events import (
    GuardsEvaluated,
    StepFinished,
    StepStarted,
    WorkflowFinished,
    WorkflowStarted,
    format_event,
)
from sparktui.ops.guards import GuardReport, Override, Verdict


def test_overrides_need_the_name_typed_and_yes_never_stands_in():
    report = GuardReport((Verdict("fit", "x@c", False, "too big", Override.FIT, overridden=True),))
    c = confirmation_for("serve", "x", report)
    assert c.typed and not c.yes_allowed and "overrides: fit" in c.prompt()
    assert c.accepts("x\n") and not c.accepts("y") and not c.accepts("X")


def test_destructive_actions_type_the_name_serve_asks_yes_no():
    stop = confirmation_for("stop", "lane-a", GuardReport(()))
    assert stop.typed and stop.yes_allowed and "Type 'lane-a'" in stop.prompt()
    assert not stop.accepts("yes")
    serve = confirmation_for("serve", "lane-a", GuardReport(()))
    assert not serve.typed and serve.accepts("Y") and not serve.accepts("")


def test_progress_lines():
    seen: list[object] = []
    events = [
        WorkflowStarted("w", 1.0, "power-cycle", "dgx6", ("a", "b")),
        GuardsEvaluated("w", 1.0, passed=("p",), refused=("r",), warnings=("w",)),
        StepStarted("w", 1.0, "plug off", "switch.dgx6", "POST ..."),
        StepFinished("w", 2.0, "plug off", "switch.dgx6", True, "confirmed off", 1.0),
        WorkflowFinished("w", 3.0, "power-cycle", "dgx6", False, "boom"),
    ]
    for e in events:
        seen.append(e)
    lines = [format_event(e) for e in events]
    assert lines[0] == "power-cycle dgx6: 2 step(s)"
    assert lines[1] == "  guards: 1 passed, 1 warning(s), 1 refused"
    assert lines[2] == "  -> plug off [switch.dgx6]: POST ..."
    assert lines[3] == "  <- plug off [switch.dgx6] ok (1.0 s): confirmed off"
    assert lines[4] == "power-cycle dgx6: FAILED: boom"
    assert [e for e in seen if isinstance(e, StepStarted)] == [events[2]]
