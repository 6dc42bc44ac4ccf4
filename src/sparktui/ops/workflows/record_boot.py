"""What a boot measured, recorded into its recipe with the operator's yes (the
console's offer after a serve; ``sparktui serve`` asks at a terminal and ``fit
--record`` does it directly, through the same `record_boot`): one step,
journaled like every workflow, the recipe's comments kept and the result
validated (ops/recipe_record.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparktui.core.config import Config
from sparktui.core.errors import InputError
from sparktui.core.measured import BootFigures, recordable
from sparktui.core.recipe import Recipe
from sparktui.core.recipe_load import load_recipe
from sparktui.ops.guards import Verdict, evaluate
from sparktui.ops.plan import Needs, OpsState, Plan, PlannedStep
from sparktui.ops.recipe_record import record_boot, unrecorded
from sparktui.ops.workflows.runner import WorkflowRun


@dataclass(frozen=True)
class RecordBoot:
    recipe: Recipe
    """The recipe offered; each plan reads it again as it is on disk then, so an
    offer confirmed twice (or after `fit --record` wrote the same figures) finds
    nothing new at its re-check and records nothing."""
    boot: BootFigures
    kind: str = field(default="record", init=False)

    @property
    def target(self) -> str:
        return self.recipe.name

    def needs(self, config: Config) -> Needs:
        return Needs()

    def plan(self, state: OpsState) -> Plan:
        name, boot = self.recipe.name, self.boot
        new: dict[str, object] = {}
        try:
            recipe = load_recipe(state.config, name)
        except InputError as exc:
            verdict = Verdict("record", name, False, f"the recipe does not load now: {exc}")
        else:
            spec = recipe.speculative
            new = dict(unrecorded(recipe, boot))
            if not recordable(boot, spec.drafter_kv_bytes_per_token if spec else 0):
                why = f"boot {boot.boot} measured neither the weights nor the KV pool"
            else:
                why = f"the recipe already holds what boot {boot.boot} measured"
            verdict = Verdict("record", name, bool(new),
                              f"boot {boot.boot} measured " + ", ".join(
                                  f"{k} = {v}" for k, v in new.items()) + ", not in the recipe "
                              "yet" if new else f"{why}: nothing to record")
        step = PlannedStep("record", name,
                           f"write {', '.join(new) or 'nothing'} into "
                           f"recipes/{name}/recipe.toml (comments kept, noted "
                           f"'measured at boot {boot.boot}')")
        return Plan(self.kind, name, evaluate([verdict], frozenset()), (step,),
                    self, detail={"recipe": name, "boot": boot.boot})

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        config = run.ctx.config

        async def write() -> str:
            path, values = record_boot(config, load_recipe(config, self.recipe.name), self.boot)
            return f"{path}: " + ", ".join(f"{k} = {v}" for k, v in values.items())

        written = await run.step("record", self.recipe.name, plan.steps[0].action, write,
                                 describe=lambda text: text)
        run.finish(True, f"recorded {written}", {"recipe": self.recipe.name,
                                                  "boot": self.boot.boot})
