"""One long prompt to a serving lane, under the prompt-length guard: the demo's
long-prompt trigger (the seeds' 22:45 prompt, ~150K tokens into the 196K lane)
is a workflow like the gate, the ladder and the bench, so the guardrail "long
prompts ... never against a lane whose scratch envelope is unknown" refuses it
there too, and the operator who means to reproduce the incident overrides it
by typing the lane's name (journaled with the override, as every override).

How the prompt is sent is the caller's (``send``: the demo's simulated client);
the workflow only decides whether it may be, and journals that it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sparktui.ops.guards import Override, evaluate
from sparktui.ops.plan import OpsState, Plan, PlannedStep
from sparktui.ops.workflows.qualify import OnServingLane, lane_prompt_length, serving_lane
from sparktui.ops.workflows.runner import WorkflowRun


@dataclass(frozen=True)
class LanePrompt(OnServingLane):
    lane: str
    tokens: int
    send: Callable[[], object] = field(compare=False, repr=False)
    """Sends the prompt (returns at once; what it returns is not read)."""
    overrides: frozenset[Override] = frozenset()
    kind: str = field(default="prompt", init=False)

    def plan(self, state: OpsState) -> Plan:
        _, verdicts, _ = serving_lane(state, self.lane)
        verdicts.append(lane_prompt_length(state.config, self.lane, self.tokens,
                                           f"a {self.tokens:,}-token prompt"))
        step = PlannedStep("prompt", self.lane, f"send one {self.tokens:,}-token request")
        return Plan(self.kind, self.lane, evaluate(verdicts, self.overrides), (step,), self,
                    detail={"lane": self.lane, "tokens": self.tokens})

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        async def send() -> None:
            self.send()

        await run.step("prompt", self.lane, f"send one {self.tokens:,}-token request", send)
        run.finish(True, f"sent a {self.tokens:,}-token prompt to {self.lane}",
                   {"lane": self.lane, "tokens": self.tokens})
