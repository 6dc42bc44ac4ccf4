"""What a boot measured, recorded into its recipe with the operator's yes (the
console's offer after a serve; ``sparktui serve`` asks at a terminal and ``fit
--record`` does it directly, through the same `record_boot`): one step,
journaled like every workflow, the recipe's comments kept and the result
validated (ops/recipe_record.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparktui.core.config import Config
from sparktui.core.measured import BootFigures
from sparktui.core.recipe import Recipe
from sparktui.ops.guards import Verdict, evaluate
from sparktui.ops.plan import Needs, OpsState, Plan, PlannedStep
from sparktui.ops.recipe_record import record_boot, unrecorded
from sparktui.ops.workflows.runner import WorkflowRun


@dataclass(frozen=True)
class RecordBoot:
    recipe: Recipe
    """As it is on disk now (what it already says is not offered again)."""
    boot: BootFigures
    kind: str = field(default="record", init=False)

    @property
    def target(self) -> str:
        return self.recipe.name

    def needs(self, config: Config) -> Needs:
        return Needs()

    def plan(self, state: OpsState) -> Plan:
        new = unrecorded(self.recipe, self.boot)
        verdict = Verdict("record", self.recipe.name, bool(new),
                          f"boot {self.boot.boot} measured " + ", ".join(
                              f"{k} = {v}" for k, v in new.items()) + ", not in the recipe yet"
                          if new else f"the recipe already holds what boot {self.boot.boot} "
                                      f"measured: nothing to record")
        step = PlannedStep("record", self.recipe.name,
                           f"write {', '.join(new) or 'nothing'} into "
                           f"recipes/{self.recipe.name}/recipe.toml (comments kept, noted "
                           f"'measured at boot {self.boot.boot}')")
        return Plan(self.kind, self.recipe.name, evaluate([verdict], frozenset()), (step,),
                    self, detail={"recipe": self.recipe.name, "boot": self.boot.boot})

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        config = run.ctx.config

        async def write() -> str:
            path, values = record_boot(config, self.recipe, self.boot)
            return f"{path}: " + ", ".join(f"{k} = {v}" for k, v in values.items())

        written = await run.step("record", self.recipe.name, plan.steps[0].action, write,
                                 describe=lambda text: text)
        run.finish(True, f"recorded {written}", {"recipe": self.recipe.name,
                                                  "boot": self.boot.boot})
