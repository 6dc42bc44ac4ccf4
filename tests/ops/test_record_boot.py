"""`RecordBoot` (a boot's figures into its recipe, the console's offer and
`fit --record`'s workflow) refuses when there is nothing new to record: a
boot whose figures the recipe already holds, a boot that measured nothing
recordable, and the same offer confirmed a second time (the re-check before
its step reads the recipe as it is on disk then, not as it was offered)."""

from __future__ import annotations

from sparktui.core.config import Config
from sparktui.core.measured import GIB, BootFigures
from sparktui.core.recipe_load import load_recipe, recipe_file
from sparktui.core.state import ClusterSnapshot
from sparktui.ops.plan import OpsState
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.record_boot import RecordBoot

RECIPE = "glm53-mxfp4-fp8-4x-r39"


def boot(weights: float | None, kv_bytes: int | None) -> BootFigures:
    tokens = 100_000
    return BootFigures("wf-boot", 1.0, "4nodes-switch-b", weights,
                       kv_bytes * tokens / GIB if kv_bytes else None,
                       tokens if kv_bytes else None, None, 131_072)


def state(config: Config) -> OpsState:
    return OpsState(config, ClusterSnapshot(0.0, ()))


def test_nothing_new_is_refused(fleet_config: Config) -> None:
    r = load_recipe(fleet_config, RECIPE)
    assert r.model.weights_per_rank_gib and r.model.kv_bytes_per_token
    spec = r.speculative
    kv = r.model.kv_bytes_per_token + (spec.drafter_kv_bytes_per_token if spec else 0)
    for figures, why in ((boot(r.model.weights_per_rank_gib, kv), "already holds"),
                         (boot(None, None), "measured neither the weights nor the KV pool")):
        plan = RecordBoot(r, figures).plan(state(fleet_config))
        assert not plan.allowed, why
        [refused] = plan.report.refused
        assert refused.guard == "record" and refused.override is None
        assert why in refused.message and "nothing to record" in refused.message
        assert "write nothing" in plan.steps[0].action
    # one figure new: offered, and only that one named
    plan = RecordBoot(r, boot(r.model.weights_per_rank_gib + 1.5, kv)).plan(state(fleet_config))
    assert plan.allowed and "model.weights_per_rank_gib" in plan.steps[0].action
    assert "kv_bytes_per_token" not in plan.steps[0].action


async def test_the_same_offer_confirmed_twice_records_once(sim_ctx, fleet_config) -> None:  # type: ignore[no-untyped-def]
    r = load_recipe(fleet_config, RECIPE)
    offer = RecordBoot(r, boot(r.model.weights_per_rank_gib + 1.5, None))
    async with sim_ctx() as (_, ctx, _):
        shown = await prepare(ctx, offer)  # the modal shows this plan...
        twice = await prepare(ctx, offer)  # ...and a second offer of the same boot
        assert shown.allowed and twice.allowed
        first = await execute(ctx, shown)
        assert first.ok, first.message
        written = recipe_file(fleet_config.recipes_dir, RECIPE).read_text()
        second = await execute(ctx, twice)
        assert not second.ok
        assert "nothing to record" in second.message, second.message
        assert recipe_file(fleet_config.recipes_dir, RECIPE).read_text() == written
